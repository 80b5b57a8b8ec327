"""Forgetting in the conversations (``sessions``): found by the needle in their words, or by the very messages
being forgotten, which a person's message in a session names (``storage.schema.SESSION_ARCHIVED``).

By id matters for a message forgotten by reply that is too short to be looked for by its words ("pin 4417":
``match.MESSAGE_TEXT_MIN``): the conversation holding it would otherwise keep showing it to the model. A
session is scrubbed, not deleted: the conversation goes on, without the text, from the very next turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from teleton.memory.forget.match import Matcher, strings
from teleton.storage.schema import SESSION_ARCHIVED
from teleton.storage.sqlite_driver import Connection

FORGOTTEN = "[forgotten]"


def archived_keys(conn: Connection, message_ids: set[int]) -> set[tuple[int, int]]:
    """(chat id, message id) of the archive rows ``message_ids``."""
    rows = conn.execute(
        "select chat_id, message_id from tg_messages where id in (select value from json_each(?))",
        (json.dumps(sorted(message_ids)),),
    )
    return {(int(chat_id), int(message_id)) for chat_id, message_id in rows}


def holding(
    conn: Connection, matcher: Matcher, scope: tuple[str, list[Any]], keys: set[tuple[int, int]]
) -> Iterator[tuple[Any, list[str]]]:
    """The sessions ``scope`` reads that hold the needle (when it is looked for by its words) or a message of
    ``keys``: each row (id, chat_id, topic_id, summary), and the strings of it the needle matched."""
    where, args = scope
    tests = ["forget_hit(summary) or forget_json(messages_json)"] if matcher.pattern is not None else []
    if keys:  # "chat:message" of each message a session message names
        named = " || ':' || ".join(f"json_extract(m.value, '$.{SESSION_ARCHIVED}[{n}]')" for n in (0, 1))
        tests.append(
            f"exists (select 1 from json_each(messages_json) m where {named} in (select value from json_each(?)))"
        )
        args = [*args, json.dumps([f"{chat}:{message}" for chat, message in sorted(keys)])]
    if not tests:
        return
    found = conn.execute(
        f"select id, chat_id, topic_id, summary, messages_json from sessions where {where} ({' or '.join(tests)})", args
    )
    for row in found:
        said = [s for s in strings(json.loads(row["messages_json"] or "[]")) if matcher.hit(s)]
        yield row, said


def scrub(conn: Connection, session_id: str, matcher: Matcher, keys: set[tuple[int, int]]) -> None:
    """The session without the needle in its summary and messages, and without the words of the messages of
    ``keys``."""
    row = conn.execute("select summary, messages_json from sessions where id = ?", (session_id,)).fetchone()
    if row is None:
        return
    summary, _ = matcher.sub(row["summary"] or "")
    raw, _ = matcher.json_sub(row["messages_json"] or "[]")
    messages = json.loads(raw)
    for message in messages if isinstance(messages, list) else []:
        named = message.get(SESSION_ARCHIVED) if isinstance(message, dict) else None
        if isinstance(named, list) and len(named) >= 2 and (named[0], named[1]) in keys:
            message["content"] = FORGOTTEN
    conn.execute(
        "update sessions set summary = ?, messages_json = ? where id = ?",
        (summary, json.dumps(messages, ensure_ascii=False), session_id),
    )
