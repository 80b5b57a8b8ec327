"""Schema step 11 -> 12: which messages are the agent's answer to which message (issue 36).

A turn's reply is one or more messages (a long answer is split); ``reply_parts`` keeps, per answered message,
the messages its reply went out as and when. What happens to the question afterwards reaches the answer
through it: an edit within ``telegram.reanswer_edit_minutes`` re-runs the turn and edits the reply in
place, a deletion within that time deletes the reply (``telegram.delete_replies``). Rows older than
Telegram's edit limit, which caps the window, are deleted as new ones are written, so the table holds two
days of replies however long the daemon runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from teleton.storage.sqlite_driver import Connection

DDL = """
create table reply_parts (
    chat_id      integer not null,
    question_id  integer not null,   -- the archived message answered
    message_id   integer not null,   -- one message of the reply, in the order sent
    part         integer not null,
    sent_at      real not null,
    primary key (chat_id, question_id, part)
);
create index reply_parts_sent on reply_parts(sent_at);
"""
CHANNEL_IDS_BELOW = -1_000_000_000_000  # -100… ids: channels and supergroups, whose message ids are per chat
EDIT_LIMIT_S = 48 * 3600  # how long Telegram lets a message be edited: no window reaches further back


@dataclass(frozen=True)
class Reply:
    chat_id: int
    question_id: int
    message_ids: tuple[int, ...]
    sent_at: float


def migrate_reply_parts(conn: Connection, run_script: Callable[[Connection, str], None]) -> None:
    run_script(conn, DDL)


def record(conn: Connection, chat_id: int, questions: Sequence[int], message_ids: Sequence[int], now: float) -> None:
    """The reply to ``questions`` is now ``message_ids`` (a re-answer replaces what was recorded)."""
    conn.execute("delete from reply_parts where sent_at < ?", (now - EDIT_LIMIT_S,))
    for question in questions:
        conn.execute("delete from reply_parts where chat_id = ? and question_id = ?", (chat_id, question))
        conn.executemany(
            "insert into reply_parts(chat_id, question_id, message_id, part, sent_at) values (?, ?, ?, ?, ?)",
            [(chat_id, question, m, i, now) for i, m in enumerate(message_ids) if m],
        )


def of_questions(conn: Connection, chat_id: int | None, questions: Sequence[int], since: float) -> list[Reply]:
    """The replies sent since ``since`` to these messages. ``chat_id`` None: a private chat or basic group
    (Telegram names no chat when it deletes there; their message ids are unique per account)."""
    where = "chat_id > ?" if chat_id is None else "chat_id = ?"
    rows = conn.execute(
        f"select chat_id, question_id, message_id, sent_at from reply_parts where {where} and sent_at >= ? "
        "and question_id in (select value from json_each(?)) order by chat_id, question_id, part",
        (CHANNEL_IDS_BELOW if chat_id is None else chat_id, since, json.dumps(list(questions))),
    ).fetchall()
    found: dict[tuple[int, int], Reply] = {}
    for chat, question, message, sent in rows:
        key = (int(chat), int(question))
        before = found.get(key)
        ids = (*before.message_ids, int(message)) if before else (int(message),)
        found[key] = Reply(key[0], key[1], ids, float(sent))
    return list(found.values())
