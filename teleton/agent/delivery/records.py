"""Delivery records: the durable state written around a turn's reply (docs/operations.md, "Exactly once").

Before a reply goes out, one transaction moves its messages to ``sending`` (``memory/feed/message_life.py``)
or marks its task, and records the reply with the ``random_id`` base Telegram deduplicates its parts by
(``reply_sends``); after the turn its messages are answered or failed and the rows go. A restart between the
two sends what is pending again with the same ids. A streamed answer also records its message, so a restart
edits the new answer into it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from teleton.gateway.contract import Once, TurnDeferred
from teleton.memory.feed import archive as fa
from teleton.memory.feed import message_life as life
from teleton.scheduler.scheduler import NotDelivered
from teleton.storage import reply_sends as rs
from teleton.storage.database import Database, storage_fault
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)


class DeliveryFailed(NotDelivered):
    """The reply could not be delivered to the chat; the message says why (a scheduled task retries)."""


@dataclass(frozen=True)
class Sending:
    """One reply on its way out: how the network deduplicates it, and its record (None: not recorded)."""

    once: Once
    row: int | None = None


class Delivery(Protocol):
    async def sending(
        self, text: str, reply_to: int | None = None, failure: str | None = None, edits: int | None = None
    ) -> Sending:
        """Called before each reply to the turn's chat, with its words; ``failure`` when what goes out is
        the turn's apology (the model failed), so a crash after it cannot turn it into an answer; ``edits``:
        the streamed message its part 0 is edited into (the record takes the stream's place)."""

    async def sent(self, reply: Sending, error: str | None = None) -> None:
        """The reply went out (``error`` None) or was refused for good."""

    async def finished(self, state: str, note: str | None = None) -> None:
        """The turn is over: ``life.STATE_ANSWERED``, ``STATE_FAILED`` (with why) or ``STATE_IGNORED``."""

    async def stream_shown(self, message_id: int) -> None:
        """A streamed message went out: recorded, so that a restart before the reply edits the answer
        into it (the turn's messages stay owed their answer meanwhile)."""

    async def stream_left(self) -> int | None:
        """The streamed message a turn cut by a restart left for these messages: this turn's now."""

    async def stream_gone(self, message_id: int) -> None:
        """A streamed message that will not become the reply (deleted): its record goes."""


class NoRecord:
    """A turn that answers nothing archived (a command typed in the terminal, a heartbeat)."""

    async def sending(
        self, text: str, reply_to: int | None = None, failure: str | None = None, edits: int | None = None
    ) -> Sending:
        return Sending(Once(rs.new_random_base(), edits=edits))

    async def sent(self, reply: Sending, error: str | None = None) -> None:
        return None

    async def finished(self, state: str, note: str | None = None) -> None:
        return None

    async def stream_shown(self, message_id: int) -> None:
        return None

    async def stream_left(self) -> int | None:
        return None

    async def stream_gone(self, message_id: int) -> None:
        return None


@dataclass
class _Recorded:
    """The reply rows of one turn, and the transaction that writes each with the turn's own record."""

    db: Database
    chat_id: int
    rows: list[int] = field(default_factory=list, init=False)
    topic_id: int | None = field(default=None, kw_only=True)  # the forum topic its replies land in

    def _answers(self) -> tuple[int, ...]:
        return ()

    async def _record(
        self,
        mark: Callable[[Connection], None],
        text: str,
        reply_to: int | None,
        failure: str | None,
        *,
        task_id: int | None = None,
        edits: int | None = None,
    ) -> Sending:
        base = rs.new_random_base()

        def op(conn: Connection) -> int:
            mark(conn)
            return rs.record(conn, chat_id=self.chat_id, text=text, reply_to=reply_to, random_base=base,
                             now=time.time(), answers=self._answers(), task_id=task_id, failure=failure,
                             edits=edits, topic_id=self.topic_id)  # fmt: skip

        row = await self.db.write(op)
        self.rows.append(row)

        async def confirm(parts: int) -> None:
            await self.db.write(lambda conn: rs.progress(conn, row, parts))

        return Sending(Once(base, confirm=confirm, edits=edits), row)

    async def sent(self, reply: Sending, error: str | None = None) -> None:
        if reply.row is not None:
            row = reply.row
            await self.db.write(lambda conn: rs.close(conn, row, rs.FAILED if error else rs.SENT))

    def _settle(self, conn: Connection) -> None:
        rs.delete(conn, self.rows)
        if answers := self._answers():  # a stream the turn left (a /stop cut it): what it showed stays
            rs.streams_settled(conn, self.chat_id, answers)

    async def stream_shown(self, message_id: int) -> None:
        if answers := self._answers():
            await self.db.write(lambda conn: rs.stream_shown(conn, self.chat_id, message_id, answers, time.time()))

    async def stream_left(self) -> int | None:
        if answers := self._answers():
            return await self.db.write(lambda conn: rs.stream_left(conn, self.chat_id, answers))
        return None

    async def stream_gone(self, message_id: int) -> None:
        if self._answers():
            await self.db.write(lambda conn: rs.stream_gone(conn, self.chat_id, message_id))


@dataclass
class MessageDelivery(_Recorded):
    """The answer state of the archived messages one turn answers."""

    message_ids: tuple[int, ...] = ()
    _since: float | None = field(default=None, init=False)

    def _answers(self) -> tuple[int, ...]:
        return self.message_ids

    async def sending(
        self, text: str, reply_to: int | None = None, failure: str | None = None, edits: int | None = None
    ) -> Sending:
        if not self.message_ids:
            return Sending(Once(rs.new_random_base(), edits=edits))
        if self._since is None:
            self._since = time.time()
        note = fa.sending_note(self._since, failure)

        def mark(conn: Connection) -> None:
            life.move(conn, self.chat_id, self.message_ids, life.STATE_SENDING, note)

        return await self._record(mark, text, reply_to, failure, edits=edits)

    async def finished(self, state: str, note: str | None = None) -> None:
        if not self.message_ids:
            return

        def op(conn: Connection) -> None:
            life.move(conn, self.chat_id, self.message_ids, state, note)
            self._settle(conn)

        await self.db.write(op)


@dataclass
class TaskDelivery(_Recorded):
    """A scheduled task's reply: ``sending_at`` before it goes out, ``delivered_at`` once it did (a task's
    reply never streams: the stream methods record nothing)."""

    task_id: int = 0

    async def sending(
        self, text: str, reply_to: int | None = None, failure: str | None = None, edits: int | None = None
    ) -> Sending:
        def mark(conn: Connection) -> None:
            sql = "update tasks set sending_at = coalesce(sending_at, ?) where id = ?"
            conn.execute(sql, (time.time(), self.task_id))

        return await self._record(mark, text, reply_to, failure, task_id=self.task_id, edits=edits)

    async def finished(self, state: str, note: str | None = None) -> None:
        def op(conn: Connection) -> None:
            if state == life.STATE_ANSWERED:
                conn.execute("update tasks set delivered_at = ? where id = ?", (time.time(), self.task_id))
            self._settle(conn)

        await self.db.write(op)


async def finish(delivery: Delivery, chat_id: int, state: str, note: str | None) -> None:
    """A turn's outcome into its record; a record that cannot be written leaves the turn deferred (its
    messages stay open and are taken up again), never forgotten as if it had ended."""
    try:
        await delivery.finished(state, note)
    except Exception as exc:
        log.error("turn_outcome_not_recorded", chat_id=chat_id, error=f"{type(exc).__name__}: {exc}")
        raise TurnDeferred(storage_fault(exc) or f"{type(exc).__name__}: {exc}") from exc
