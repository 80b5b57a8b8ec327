"""Helpers of the delivery family: a gate a scripted model request blocks on, archiving a message the way
the Telegram layer leaves it (accepted)."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

from telethon import functions, types

from teleton.gateway.contract import IncomingMessage
from teleton.memory.feed import message_life as life
from teleton.storage import Database
from tests.agent.conftest import archive_incoming
from tests.telegram.conftest import RecordingClient

BOUND_S = 60.0  # never a threshold: only so that a hang fails instead of blocking the suite


class Gate:
    """A model request that stalls until the test opens the gate (no fixed delay): ``entered`` tells that the
    request reached the fake API and is in flight."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def hold(self) -> None:
        """Called on the fake server's thread: mark the request in flight, then wait for the test."""
        self.entered.set()
        self.opened.wait(BOUND_S)

    def open(self) -> None:
        self.opened.set()


async def archive_accepted(db: Database, msg: IncomingMessage) -> None:
    """What the Telegram layer leaves behind before a turn: the message archived and accepted by the gate."""
    await archive_incoming(db, msg, life.STATE_ACCEPTED)


async def answer_state(db: Database, chat_id: int, message_id: int) -> tuple[str | None, str | None]:
    row = await db.fetchone(
        "select agent_state, agent_note from tg_messages where chat_id = ? and message_id = ?", (chat_id, message_id)
    )
    assert row is not None, f"message {message_id} of chat {chat_id} is not archived"
    return row[0], row[1]


class LinkClient(RecordingClient):
    """The RecordingClient with a scripted connection, so the gateway's real life cycle runs without a network:
    ``connect`` fails with the next of ``connect_failures`` or opens a link, ``drop()`` ends the link (what
    Telethon's ``disconnected`` future reports), and every request is still answered or refused by
    ``RecordingClient`` (``fail_when``)."""

    def __init__(self) -> None:
        super().__init__()
        self.connects = 0
        self.connect_failures: list[BaseException] = []
        self._link: asyncio.Future[None] | None = None

    async def connect(self) -> None:
        self.connects += 1
        if self.connect_failures:
            raise self.connect_failures.pop(0)
        self._link = asyncio.get_running_loop().create_future()

    @property
    def disconnected(self) -> asyncio.Future[None]:
        if self._link is None:
            self._link = asyncio.get_running_loop().create_future()
            self._link.set_result(None)
        return self._link

    def drop(self) -> None:
        if self._link is not None and not self._link.done():
            self._link.set_result(None)

    async def disconnect(self) -> None:  # type: ignore[override]
        self.drop()

    def answer(self, request: Any) -> Any:
        if isinstance(request, functions.updates.GetStateRequest):
            return types.updates.State(pts=1, qts=0, date=datetime.now(UTC), seq=0, unread_count=0)
        if isinstance(request, functions.messages.GetDialogsRequest):
            return types.messages.Dialogs(dialogs=[], messages=[], chats=[], users=[])
        return super().answer(request)
