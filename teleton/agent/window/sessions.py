"""Sessions: one active conversation per chat (per topic in a forum), in the ``sessions`` table.

A session holds the messages in Messages API format, the summary it started from (after a compaction or
carried from the session before), and the token figures the API reported, in its terms: input neither read
from nor written to the prompt cache, output, cache reads, cache writes (a session from before schema step
15 has its writes inside ``input_tokens`` and 0 writes: the sum is all its input either way). Ending a
session keeps the row (``active = 0``, ``end_reason``, its summary), so history is never deleted, only
retired.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from teleton.llm.client import Message, Usage
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection


@dataclass
class Session:
    id: str
    chat_id: int
    messages: list[Message] = field(default_factory=list)
    topic_id: int = 0  # the forum topic it is the conversation of; 0: the chat's main line
    summary: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    last_input_tokens: int = 0  # how full the window was at the last request (prompt + answer)
    created_at: float = 0.0
    updated_at: float = 0.0

    def account(self, total: Usage, last: Usage) -> None:
        self.input_tokens += total.input_tokens
        self.output_tokens += total.output_tokens
        self.cache_read_tokens += total.cache_read_tokens
        self.cache_write_tokens += total.cache_write_tokens
        self.last_input_tokens = last.prompt_tokens + last.output_tokens

    @property
    def all_input(self) -> int:
        """Every input token of the session's requests: not cached, written to the cache, read from it."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens


def _row_to_session(row: Any) -> Session:
    return Session(
        id=row["id"],
        chat_id=int(row["chat_id"]),
        messages=json.loads(row["messages_json"]),
        topic_id=int(row["topic_id"]),
        summary=row["summary"],
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        cache_read_tokens=int(row["cache_read_tokens"]),
        cache_write_tokens=int(row["cache_write_tokens"]),
        last_input_tokens=int(row["last_input_tokens"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


class SessionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def active(self, chat_id: int, topic: int = 0) -> Session | None:
        def _load(conn: Connection) -> Session | None:
            # Parsed on the reader thread: a long session's JSON would otherwise stall the event loop.
            row = conn.execute(
                "select * from sessions where chat_id = ? and topic_id = ? and active = 1 "
                "order by updated_at desc limit 1",
                (chat_id, topic),
            ).fetchone()
            return None if row is None else _row_to_session(row)

        return await self.db.read(_load)

    async def create(
        self,
        chat_id: int,
        *,
        topic: int = 0,
        summary: str = "",
        messages: list[Message] | None = None,
        last_input_tokens: int = 0,
    ) -> Session:
        now = time.time()
        session = Session(
            id=uuid.uuid4().hex,
            chat_id=chat_id,
            topic_id=topic,
            messages=list(messages or []),
            summary=summary,
            last_input_tokens=last_input_tokens,
            created_at=now,
            updated_at=now,
        )

        def _create(conn: Connection) -> None:
            _insert(conn, session)

        await self.db.write(_create)
        return session

    async def save(self, session: Session) -> None:
        """Write the session back. A session retired meanwhile is never written into: that would lose
        the exchange; ``SessionRetired`` says so instead."""
        session.updated_at = time.time()
        messages = list(session.messages)  # a snapshot: serialised on the writer thread, off the event loop

        def _save(conn: Connection) -> None:
            cur = conn.execute(
                "update sessions set messages_json = ?, summary = ?, input_tokens = ?, output_tokens = ?, "
                "cache_read_tokens = ?, cache_write_tokens = ?, last_input_tokens = ?, updated_at = ? "
                "where id = ? and active = 1",
                (
                    json.dumps(messages, ensure_ascii=False),
                    session.summary,
                    session.input_tokens,
                    session.output_tokens,
                    session.cache_read_tokens,
                    session.cache_write_tokens,
                    session.last_input_tokens,
                    session.updated_at,
                    session.id,
                ),
            )
            if cur.rowcount == 0:
                raise SessionRetired(f"session {session.id} of chat {session.chat_id} is no longer active")

        await self.db.write(_save)

    async def replace(
        self,
        old: Session,
        reason: str,
        summary: str,
        *,
        carried: str = "",
        messages: list[Message] | None = None,
        last_input_tokens: int = 0,
    ) -> Session:
        """End ``old`` (with its summary) and start the chat's next session (from ``carried`` and
        ``messages``) in ONE transaction: a crash never leaves the chat without its session or with two."""
        now = time.time()
        new = Session(
            id=uuid.uuid4().hex, chat_id=old.chat_id, messages=list(messages or []), summary=carried,
            last_input_tokens=last_input_tokens, created_at=now, updated_at=now, topic_id=old.topic_id,
        )  # fmt: skip

        def _replace(conn: Connection) -> None:
            conn.execute(
                "update sessions set active = 0, ended_at = ?, end_reason = ?, summary = ? where id = ?",
                (now, reason, summary, old.id),
            )
            _insert(conn, new)

        await self.db.write(_replace)
        return new

    async def end(self, session: Session, reason: str, summary: str | None = None) -> None:
        await self.db.execute(
            "update sessions set active = 0, ended_at = ?, end_reason = ?, summary = ? where id = ?",
            (time.time(), reason, session.summary if summary is None else summary, session.id),
        )

    async def topics(self, chat_ids: list[int]) -> dict[int, list[int]]:
        """Chat id -> the forum topics with an active session of their own (the main line, 0, left out)."""
        rows = await self.db.fetchall(
            "select chat_id, topic_id from sessions where active = 1 and topic_id != 0 "
            "and chat_id in (select value from json_each(?)) order by chat_id, topic_id",
            (json.dumps(chat_ids),),
        )
        found: dict[int, list[int]] = {}
        for chat_id, topic in rows:
            found.setdefault(int(chat_id), []).append(int(topic))
        return found

    async def totals(self, chat_id: int | None = None) -> dict[str, int]:
        where, args = ("where chat_id = ?", (chat_id,)) if chat_id is not None else ("", ())
        row = await self.db.fetchone(
            "select count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
            f"coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0) from sessions {where}",
            args,
        )
        return {
            "sessions": int(row[0]),
            "input_tokens": int(row[1]),
            "output_tokens": int(row[2]),
            "cache_read_tokens": int(row[3]),
            "cache_write_tokens": int(row[4]),
        }


class SessionRetired(RuntimeError):
    """A write was aimed at a session that has ended (the chat moved on to a new one)."""


def _insert(conn: Connection, session: Session) -> None:
    # One active session per chat or topic: whatever was active is retired in the same transaction.
    conn.execute(
        "update sessions set active = 0, ended_at = ?, end_reason = coalesce(end_reason, 'superseded') "
        "where chat_id = ? and topic_id = ? and active = 1",
        (session.created_at, session.chat_id, session.topic_id),
    )
    conn.execute(
        "insert into sessions(id, chat_id, topic_id, active, messages_json, summary, last_input_tokens, "
        "created_at, updated_at) values (?,?,?,1,?,?,?,?,?)",
        (
            session.id,
            session.chat_id,
            session.topic_id,
            json.dumps(session.messages, ensure_ascii=False),
            session.summary,
            session.last_input_tokens,
            session.created_at,
            session.updated_at,
        ),
    )


def expiry_reason(session: Session, now: float, *, reset_hour: int | None, idle_minutes: int | None) -> str | None:
    """Why a session should end before this turn ('idle' / 'daily-reset'), or None. Pure."""
    if not session.messages:
        return None
    if idle_minutes is not None and now - session.updated_at > idle_minutes * 60:
        return "idle"
    if reset_hour is not None:
        current = datetime.fromtimestamp(now).astimezone()
        boundary = current.replace(hour=reset_hour, minute=0, second=0, microsecond=0)
        if boundary > current:
            boundary -= timedelta(days=1)
        if session.updated_at < boundary.timestamp():
            return "daily-reset"
    return None
