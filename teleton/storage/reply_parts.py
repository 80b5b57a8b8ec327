"""Which messages are the agent's answer to which message (``reply_parts``, issue 36): an edit of the question
within ``telegram.reanswer_edit_minutes`` re-runs the turn and edits the reply in place, a deletion deletes
the reply (``telegram.delete_replies``). Rows older than Telegram's edit limit, which caps the window, are
deleted as new ones are written. The table: ``docs/schema.sql``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from teleton.storage.sqlite_driver import Connection

CHANNEL_IDS_BELOW = -1_000_000_000_000  # -100… ids: channels and supergroups, whose message ids are per chat
EDIT_LIMIT_S = 48 * 3600  # how long Telegram lets a message be edited: no window reaches further back


@dataclass(frozen=True)
class Reply:
    chat_id: int
    question_id: int
    message_ids: tuple[int, ...]
    sent_at: float


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
