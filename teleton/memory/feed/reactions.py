"""Reactions to archived messages, and the answers of ours people marked wrong (schema step 11).

Telegram tells a bot each person's change (who, the reactions before and after) and a user account the
message's reactions as they are now: counts per reaction, with the most recent reactors by name. Both become
one ``ReactionChange``: the reactions named now, and whose (or which) reactions the update settles, so one
not named any more is marked taken back (``removed_at``) only when the update says so.

A negative reaction to an answer of ours, or a reply to it that starts by saying it is wrong, becomes
``feedback``: a correction candidate that names the exchange's messages (it copies none of their words) and
is shown only to later turns of the same chat, so it never crosses a label (``judged``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from teleton.storage.sqlite_driver import Connection

# The reactions that say "this answer is wrong or bad" (Telegram's standard set has no "wrong").
NEGATIVE = frozenset({"👎", "💩", "🤮", "🤬", "😡", "🤡"})
# A reply that opens by saying the answer is wrong, in the languages the memory serves.
_WRONG = re.compile(
    r"^\W*(wrong|incorrect|not (true|right|correct)|that'?s (wrong|not (true|right|correct))|no,? (that'?s|it'?s) "
    r"(wrong|not)|неправильно|неверно|не так|это не так|falsch|stimmt nicht|incorrecto|falso|faux|c'est faux|"
    r"sbagliato|errado|błędnie|źle)\b",
    re.IGNORECASE,
)
FEEDBACK_DAYS = 30  # how long a correction candidate is shown to its chat's turns


@dataclass(frozen=True)
class Reaction:
    user_id: int
    emoji: str  # the emoji, or 'custom:<document id>', or 'paid'
    date: float


@dataclass(frozen=True)
class ReactionChange:
    """What one update says of a message's reactions. ``settled``: the people whose reactions it lists in
    full (None: everyone's); ``counted``: the reactions Telegram still counts on it (None: not said). A
    reaction not in ``present`` is taken back when its person is settled or its reaction no longer counted."""

    chat_id: int
    message_id: int
    present: tuple[Reaction, ...]
    settled: frozenset[int] | None
    counted: frozenset[str] | None = None


def is_negative(emoji: str) -> bool:
    return emoji in NEGATIVE


def says_wrong(text: str) -> bool:
    return _WRONG.match(text) is not None


def apply_change(conn: Connection, change: ReactionChange, now: float) -> list[Reaction]:
    """Archive the change; the reactions that are new (or given again after being taken back)."""
    new = []
    for r in change.present:
        cur = conn.execute(
            "insert into tg_reactions(chat_id, message_id, user_id, emoji, date) values (?, ?, ?, ?, ?) "
            "on conflict(chat_id, message_id, user_id, emoji) do update set date = excluded.date, removed_at = null "
            "where tg_reactions.removed_at is not null",
            (change.chat_id, change.message_id, r.user_id, r.emoji, r.date),
        )
        if cur.rowcount:
            new.append(r)
    named = {(r.user_id, r.emoji) for r in change.present}
    rows = conn.execute(
        "select user_id, emoji from tg_reactions where chat_id = ? and message_id = ? and removed_at is null",
        (change.chat_id, change.message_id),
    ).fetchall()
    for user_id, emoji in rows:
        if (user_id, emoji) in named:
            continue
        settled = change.settled is None or user_id in change.settled
        if settled or (change.counted is not None and emoji not in change.counted):
            conn.execute(
                "update tg_reactions set removed_at = ? where chat_id = ? and message_id = ? and user_id = ? "
                "and emoji = ?",
                (now, change.chat_id, change.message_id, user_id, emoji),
            )
    return new


def note_feedback(
    conn: Connection, chat_id: int, answer_id: int, user_id: int, signal: str, now: float, reply_id: int | None = None
) -> bool:
    """A judgement of message ``answer_id`` kept when it is an answer of ours judged by someone else."""
    row = conn.execute(
        "select is_outgoing, reply_to_id, date, topic_id, sender_id from tg_messages "
        "where chat_id = ? and message_id = ?",
        (chat_id, answer_id),
    ).fetchone()
    if row is None or not row[0] or row[4] == user_id:
        return False
    question = row[1]
    if question is None:  # a private chat's answer replies to nothing: it answered the message before it
        found = conn.execute(
            "select message_id from tg_messages where chat_id = ? and topic_id is ? and is_outgoing = 0 "
            "and is_service = 0 and date <= ? and message_id < ? order by date desc, message_id desc limit 1",
            (chat_id, row[3], row[2], answer_id),
        ).fetchone()
        question = found[0] if found else None
    cur = conn.execute(
        "insert into feedback(chat_id, answer_id, question_id, user_id, signal, reply_id, created_at) "
        "values (?, ?, ?, ?, ?, ?, ?) on conflict do nothing",
        (chat_id, answer_id, question, user_id, signal, reply_id, now),
    )
    return bool(cur.rowcount)


@dataclass(frozen=True)
class Judged:
    """An answer of ours someone marked wrong, as a later turn of the same chat is shown it."""

    question: str
    answer: str
    by: str
    signal: str  # the reaction, or the words of the reply
    date: float
    replied: bool = False  # judged by a reply (``signal`` is its words), not a reaction


def judged(conn: Connection, chat_id: int, since: float, limit: int) -> list[Judged]:
    """The chat's answers marked wrong since ``since``, newest first; an exchange whose answer was deleted
    or forgotten is gone with it."""
    rows = conn.execute(
        "select coalesce(q.text, ''), a.text, coalesce(nullif(trim(coalesce(u.first_name, '') || ' ' || "
        "coalesce(u.last_name, '')), ''), cast(f.user_id as text)), f.signal, r.text, f.created_at "
        "from feedback f join tg_messages a on a.chat_id = f.chat_id and a.message_id = f.answer_id "
        "and a.deleted = 0 "
        "left join tg_messages q on q.chat_id = f.chat_id and q.message_id = f.question_id and q.deleted = 0 "
        "left join tg_messages r on r.chat_id = f.chat_id and r.message_id = f.reply_id and r.deleted = 0 "
        "left join tg_users u on u.id = f.user_id "
        "where f.chat_id = ? and f.created_at >= ? and (f.reply_id is null or r.text is not null) "
        "order by f.created_at desc, f.id desc limit ?",
        (chat_id, since, limit),
    ).fetchall()
    return [Judged(str(r[0]), str(r[1]), str(r[2]), str(r[3] if r[4] is None else r[4]), float(r[5]), r[4] is not None)
            for r in rows]  # fmt: skip


def on_answers(conn: Connection, since: float) -> dict[str, int]:
    """Reactions given since ``since`` to answers of ours in every chat (by others, still standing), per
    reaction, most given first."""
    rows = conn.execute(
        "select r.emoji, count(*) from tg_reactions r join tg_messages m on m.chat_id = r.chat_id "
        "and m.message_id = r.message_id where m.is_outgoing = 1 and r.removed_at is null and r.date >= ? "
        "and r.user_id != coalesce(m.sender_id, 0) group by r.emoji order by count(*) desc, r.emoji",
        (since,),
    ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}
