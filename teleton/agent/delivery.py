"""Delivery records: the durable state written around a turn's reply (DESIGN §11, "Delivery guarantees").

A turn answers either archived messages (their ``agent_state`` in ``tg_messages``) or a scheduled task (its
``sending_at`` / ``delivered_at`` in ``tasks``). Before the first word goes to the chat the record says
"sending"; after the turn it says answered, or failed with a reason. A crash between the two is resolved
after the restart by looking for our reply in the chat's archive, never by sending again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from teleton.memory import feed_archive as fa
from teleton.scheduler.scheduler import NotDelivered
from teleton.storage.database import Database


class DeliveryFailed(NotDelivered):
    """The reply could not be delivered to the chat; the message says why (a scheduled task retries)."""


class Delivery(Protocol):
    async def sending(self, failure: str | None = None) -> None:
        """Called once, just before the first send to the turn's chat; ``failure`` when what goes out is the
        turn's apology (the model failed), so a crash after it cannot turn it into an answer."""

    async def finished(self, state: str, note: str | None = None) -> None:
        """The turn is over: ``fa.STATE_ANSWERED``, ``STATE_FAILED`` (with why) or ``STATE_IGNORED``."""


class NoRecord:
    """A turn that answers nothing archived (a command typed in the terminal, a heartbeat)."""

    async def sending(self, failure: str | None = None) -> None:
        return None

    async def finished(self, state: str, note: str | None = None) -> None:
        return None


@dataclass
class MessageDelivery:
    """The answer state of the archived messages one turn answers."""

    db: Database
    chat_id: int
    message_ids: tuple[int, ...]
    _sending: bool = field(default=False, init=False)

    async def sending(self, failure: str | None = None) -> None:
        if self._sending or not self.message_ids:
            return
        self._sending = True
        note = fa.sending_note(time.time(), failure)
        await self.db.write(lambda c: fa.set_answer_state(c, self.chat_id, self.message_ids, fa.STATE_SENDING, note))

    async def finished(self, state: str, note: str | None = None) -> None:
        if self.message_ids:
            await self.db.write(lambda c: fa.set_answer_state(c, self.chat_id, self.message_ids, state, note))


@dataclass
class TaskDelivery:
    """A scheduled task's reply: ``sending_at`` before it goes out, ``delivered_at`` once it did."""

    db: Database
    task_id: int

    async def sending(self, failure: str | None = None) -> None:
        await self.db.execute("update tasks set sending_at = ? where id = ?", (time.time(), self.task_id))

    async def finished(self, state: str, note: str | None = None) -> None:
        if state == fa.STATE_ANSWERED:
            await self.db.execute("update tasks set delivered_at = ? where id = ?", (time.time(), self.task_id))
