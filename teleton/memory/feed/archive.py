"""The Telegram feed archive: chats, users and messages as plain records, written with plain SQL.

Nothing here knows Telethon; ``teleton.telegram`` turns TL objects into these records. Every write is
idempotent on its natural key ((chat_id, message_id) for messages, id for chats and users), so a replayed
update or a restart that sees the same message again never duplicates a row. Deletions only mark rows;
edits keep the latest text and set the edited flag. The functions take a connection inside the caller's
transaction, so the write-behind batcher can apply many of them in one commit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.memory.feed.message_life import OPEN_STATES, STATE_HISTORY
from teleton.memory.search.corpora import FEED
from teleton.memory.search.vector_store import delete_vectors
from teleton.storage.sqlite_driver import Connection


@dataclass(frozen=True)
class MessageRecord:
    chat_id: int
    message_id: int
    date: float
    text: str = ""
    sender_id: int | None = None
    sender_name: str = ""
    is_outgoing: bool = False
    media_kind: str | None = None
    reply_to_id: int | None = None
    fwd_from: str | None = None
    is_service: bool = False
    edit_date: float | None = None
    # The gate's one fact the text does not hold (a mention by entity): kept so a restart judges it alike.
    mentions_us: bool = False
    topic_id: int | None = None  # the forum topic it was written in (its top message id)


@dataclass(frozen=True)
class ArchiveResult:
    """What the archive knew about a message after writing it."""

    row_id: int
    new: bool
    agent_state: str | None
    changed: bool = False  # an edit changed the text


def upsert_chat(conn: Connection, chat: ChatInfo, now: float) -> None:
    conn.execute(
        "insert into tg_chats(id, type, title, username, member_count, updated_at) values (?,?,?,?,?,?) "
        "on conflict(id) do update set type = excluded.type, "
        "title = case when excluded.title != '' then excluded.title else tg_chats.title end, "
        "username = coalesce(excluded.username, tg_chats.username), "
        "member_count = coalesce(excluded.member_count, tg_chats.member_count), "
        "updated_at = excluded.updated_at",
        (chat.id, chat.type, chat.title, chat.username, chat.member_count, now),
    )


def upsert_user(conn: Connection, user: UserInfo, now: float) -> None:
    if user.partial:
        conn.execute(
            "insert into tg_users(id, first_name, last_name, username, phone, is_bot, updated_at) "
            "values (?,?,?,?,NULL,?,?) on conflict(id) do update set "
            "first_name = case when excluded.first_name != '' then excluded.first_name "
            "else tg_users.first_name end, "
            "username = coalesce(tg_users.username, excluded.username), updated_at = excluded.updated_at",
            (user.id, user.first_name, user.last_name, user.username, int(user.is_bot), now),
        )
        return
    # A full user object is authoritative: a phone that is no longer visible is dropped, not kept.
    conn.execute(
        "insert into tg_users(id, first_name, last_name, username, phone, is_bot, updated_at) "
        "values (?,?,?,?,?,?,?) on conflict(id) do update set first_name = excluded.first_name, "
        "last_name = excluded.last_name, username = excluded.username, phone = excluded.phone, "
        "is_bot = excluded.is_bot, updated_at = excluded.updated_at",
        (user.id, user.first_name, user.last_name, user.username, user.phone, int(user.is_bot), now),
    )


def insert_message(conn: Connection, msg: MessageRecord, *, agent_state: str | None = None) -> ArchiveResult:
    """Archive a message once. A second sighting (replay, catch-up, backfill) changes nothing."""
    cur = conn.execute(
        "insert into tg_messages(chat_id, message_id, sender_id, sender_name, date, text, is_outgoing, "
        "media_kind, reply_to_id, fwd_from, is_service, edited, edit_date, agent_state, mentions_us, topic_id) "
        "values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) on conflict(chat_id, message_id) do nothing",
        (
            msg.chat_id,
            msg.message_id,
            msg.sender_id,
            msg.sender_name,
            msg.date,
            msg.text,
            int(msg.is_outgoing),
            msg.media_kind,
            msg.reply_to_id,
            msg.fwd_from,
            int(msg.is_service),
            int(msg.edit_date is not None),
            msg.edit_date,
            agent_state,
            int(msg.mentions_us),
            msg.topic_id,
        ),
    )
    if cur.rowcount:
        return ArchiveResult(row_id=int(cur.lastrowid), new=True, agent_state=agent_state)
    row = conn.execute(
        "select id, agent_state from tg_messages where chat_id = ? and message_id = ?",
        (msg.chat_id, msg.message_id),
    ).fetchone()
    return ArchiveResult(row_id=int(row[0]), new=False, agent_state=row[1])


def apply_edit(conn: Connection, msg: MessageRecord) -> ArchiveResult:
    """Keep the latest text of an edited message; archive it whole if we never saw the original."""
    edit_date = msg.edit_date if msg.edit_date is not None else msg.date
    row = conn.execute(
        "select id, text, agent_state, edit_date from tg_messages where chat_id = ? and message_id = ?",
        (msg.chat_id, msg.message_id),
    ).fetchone()
    if row is None:
        return insert_message(conn, _with_edit(msg, edit_date), agent_state=STATE_HISTORY)
    row_id, old_text, state, old_edit = int(row[0]), row[1], row[2], row[3]
    if old_edit is not None and old_edit > edit_date:
        return ArchiveResult(row_id=row_id, new=False, agent_state=state)  # a stale edit arrived late
    changed = old_text != msg.text
    conn.execute(
        "update tg_messages set text = ?, media_kind = coalesce(?, media_kind), edited = 1, edit_date = ?, "
        "embedded = case when ? then 0 else embedded end where id = ?",
        (msg.text, msg.media_kind, edit_date, int(changed), row_id),
    )
    if changed:
        _drop_vector(conn, row_id)
    return ArchiveResult(row_id=row_id, new=False, agent_state=state, changed=changed)


def set_text(conn: Connection, chat_id: int, message_id: int, text: str) -> None:
    """What a message's file said, read after it was archived, becomes its text (an edit of ours, not its
    sender's: ``edited`` stays as it was). The triggers re-index it and mark it for re-embedding."""
    row = conn.execute(
        "select id from tg_messages where chat_id = ? and message_id = ?", (chat_id, message_id)
    ).fetchone()
    if row is None:
        return
    conn.execute("update tg_messages set text = ?, embedded = 0 where id = ?", (text, int(row[0])))
    _drop_vector(conn, int(row[0]))


def mark_service(conn: Connection, chat_id: int, message_ids: Sequence[int]) -> None:
    """Not conversation (a slash command and its reply): kept, but out of context and search like Telegram's
    service messages (``FEED``'s filter, ``reads``), and with no keyword row or vector either: the context
    its keyword row took when it was archived would otherwise carry the talk before it (what /forget counts
    and rebuilds: ``forget.feed.neighbours`` passes over a service row that has none)."""
    marks = json.dumps(list(message_ids))
    ids = [
        int(row[0])
        for row in conn.execute(
            "select id from tg_messages where chat_id = ? and message_id in (select value from json_each(?))",
            (chat_id, marks),
        )
    ]
    if not ids:
        return
    rows = json.dumps(ids)
    conn.execute(
        "update tg_messages set is_service = 1, embedded = 1 where id in (select value from json_each(?))", (rows,)
    )
    conn.execute("delete from tg_messages_fts where rowid in (select value from json_each(?))", (rows,))
    for row_id in ids:
        _drop_vector(conn, row_id)


def mark_deleted(conn: Connection, chat_id: int | None, message_ids: Sequence[int]) -> int:
    """Mark messages deleted (kept for the record). ``chat_id`` None: a DM or basic group deletion.

    Telegram sends those without a chat: their ids are unique per account across all non-channel chats,
    so they match rows whose chat id is not a channel's (marked channel ids are below -10**12).
    """
    ids = list(message_ids)
    total = 0
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        if chat_id is None:
            sql = f"update tg_messages set deleted = 1 where chat_id > ? and message_id in ({marks})"
            params: list[Any] = [-(10**12), *part]
        else:
            sql = f"update tg_messages set deleted = 1 where chat_id = ? and message_id in ({marks})"
            params = [chat_id, *part]
        total += int(conn.execute(sql, params).rowcount)
    return total


def any_open(conn: Connection, chat_id: int, message_ids: Sequence[int]) -> bool:
    """Whether any of these messages is still owed an answer."""
    row = conn.execute(
        "select 1 from tg_messages where chat_id = ? and message_id in (select value from json_each(?)) "
        "and agent_state in (select value from json_each(?)) limit 1",
        (chat_id, json.dumps(list(message_ids)), json.dumps(OPEN_STATES)),
    ).fetchone()
    return row is not None


@dataclass(frozen=True)
class OpenMessage:
    """A message still owed an answer, as the archive knows it (for recovery after a restart)."""

    chat_id: int
    chat_type: str
    chat_title: str
    message_id: int
    date: float
    text: str
    state: str
    note: str | None
    sender: UserInfo | None
    reply_to_id: int | None
    fwd_from: str | None = None
    mentions_us: bool = False
    topic_id: int | None = None


def open_messages(conn: Connection) -> list[OpenMessage]:
    """Every message in an open state, oldest first within each chat."""
    rows = conn.execute(
        "select m.chat_id, coalesce(c.type, case when m.chat_id > 0 then 'dm' else 'group' end) as chat_type, "
        "coalesce(c.title, '') as title, m.message_id, m.date, m.text, m.agent_state, m.agent_note, "
        "m.sender_id, m.reply_to_id, m.fwd_from, m.mentions_us, m.topic_id, "
        "u.first_name, u.last_name, u.username, u.phone, u.is_bot "
        "from tg_messages m left join tg_chats c on c.id = m.chat_id left join tg_users u on u.id = m.sender_id "
        "where m.agent_state in (select value from json_each(?)) order by m.chat_id, m.date, m.message_id",
        (json.dumps(OPEN_STATES),),
    ).fetchall()
    return [
        OpenMessage(
            chat_id=int(r["chat_id"]),
            chat_type=str(r["chat_type"]),
            chat_title=str(r["title"]),
            message_id=int(r["message_id"]),
            date=float(r["date"]),
            text=str(r["text"]),
            state=str(r["agent_state"]),
            note=r["agent_note"],
            sender=None
            if r["sender_id"] is None
            else UserInfo(
                id=int(r["sender_id"]),
                first_name=r["first_name"] or "",
                last_name=r["last_name"] or "",
                username=r["username"],
                phone=r["phone"],
                is_bot=bool(r["is_bot"]),
            ),
            reply_to_id=r["reply_to_id"],
            fwd_from=r["fwd_from"],
            mentions_us=bool(r["mentions_us"]),
            topic_id=r["topic_id"],
        )
        for r in rows
    ]


def sending_note(since: float, failure: str | None = None) -> str:
    """The note of a ``sending`` record: when the reply started to go out, and why the turn failed when
    what goes out is its apology."""
    return f"{since!r} {failure}" if failure else repr(since)


def read_sending_note(note: str | None, default: float) -> tuple[float, str | None]:
    stamp, _, failure = (note or "").partition(" ")
    try:
        return float(stamp), failure or None
    except ValueError:
        return default, None


def our_message_since(conn: Connection, chat_id: int, since: float) -> bool:
    """Whether we sent anything in the chat at or after ``since`` (a reply that went out before a crash)."""
    row = conn.execute(
        "select 1 from tg_messages where chat_id = ? and is_outgoing = 1 and date >= ? limit 1", (chat_id, since)
    ).fetchone()
    return row is not None


def answer_counts(conn: Connection) -> dict[str, int]:
    """How many messages are in each answer state (for `teleton status`)."""
    return {
        str(state): int(n)
        for state, n in conn.execute(
            "select agent_state, count(*) from tg_messages where agent_state in "
            "('archived', 'accepted', 'sending', 'failed') group by agent_state"
        )
    }


def set_chat_title(conn: Connection, chat_id: int, title: str, now: float) -> None:
    conn.execute("update tg_chats set title = ?, updated_at = ? where id = ?", (title, now, chat_id))


def adjust_member_count(conn: Connection, chat_id: int, delta: int, now: float) -> None:
    conn.execute(
        "update tg_chats set member_count = max(0, member_count + ?), updated_at = ? "
        "where id = ? and member_count is not null",
        (delta, now, chat_id),
    )


def is_our_message(conn: Connection, chat_id: int, message_id: int) -> bool:
    row = conn.execute(
        "select is_outgoing from tg_messages where chat_id = ? and message_id = ?", (chat_id, message_id)
    ).fetchone()
    return bool(row and row[0])


def senders_of(conn: Connection, chat_id: int, message_ids: list[int]) -> dict[int, bool]:
    """Of ``message_ids``, those the archive holds in chat ``chat_id``: id -> whether it is ours."""
    marks = ",".join("?" * len(message_ids))
    rows = conn.execute(
        f"select message_id, is_outgoing from tg_messages where chat_id = ? and message_id in ({marks})",
        (chat_id, *message_ids),
    ).fetchall()
    return {int(row[0]): bool(row[1]) for row in rows}


def known_user(conn: Connection, user_id: int) -> UserInfo | None:
    row = conn.execute(
        "select id, first_name, last_name, username, phone, is_bot from tg_users where id = ?", (user_id,)
    ).fetchone()
    if row is None:
        return None
    return UserInfo(
        id=int(row[0]), first_name=row[1], last_name=row[2], username=row[3], phone=row[4], is_bot=bool(row[5])
    )


def rename_sender(conn: Connection, chat_id: int, old: str, new: str) -> None:
    """Messages of ``chat_id`` received from ``old`` are from ``new`` (the FTS row follows, by trigger)."""
    sql = "update tg_messages set sender_name = ? where chat_id = ? and sender_name = ? and is_outgoing = 0"
    conn.execute(sql, (new, chat_id, old))


def last_message_id(conn: Connection, chat_id: int) -> int | None:
    row = conn.execute("select max(message_id) from tg_messages where chat_id = ?", (chat_id,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


@dataclass(frozen=True)
class FeedStats:
    messages: int
    chats: int
    users: int
    edited: int
    deleted: int
    embedded: int
    per_chat: list[tuple[int, str, int]]  # (chat id, title, messages), busiest first


def stats(conn: Connection, top: int = 10) -> FeedStats:
    m = conn.execute(
        "select count(*), coalesce(sum(edited),0), coalesce(sum(deleted),0), coalesce(sum(embedded = 1),0) "
        "from tg_messages"
    ).fetchone()
    chats = conn.execute("select count(*) from tg_chats").fetchone()[0]
    users = conn.execute("select count(*) from tg_users").fetchone()[0]
    rows = conn.execute(
        "select m.chat_id, coalesce(c.title, ''), count(*) as n from tg_messages m "
        "left join tg_chats c on c.id = m.chat_id group by m.chat_id order by n desc limit ?",
        (top,),
    ).fetchall()
    return FeedStats(
        messages=int(m[0]),
        chats=int(chats),
        users=int(users),
        edited=int(m[1]),
        deleted=int(m[2]),
        embedded=int(m[3]),
        per_chat=[(int(r[0]), str(r[1]), int(r[2])) for r in rows],
    )


def _with_edit(msg: MessageRecord, edit_date: float) -> MessageRecord:
    return replace(msg, edit_date=edit_date)


def _drop_vector(conn: Connection, row_id: int) -> None:
    # The old text's vector would otherwise answer searches for words the message no longer says,
    # until the embedding worker gets to the edited row.
    if conn.execute("select 1 from sqlite_master where name = ?", (FEED.vec,)).fetchone():
        delete_vectors(conn, FEED, [row_id])
