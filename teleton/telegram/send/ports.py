"""What the send side is given by the gateway that joins it to the receive side, as Protocols: the archive
our sent messages go into, the records of a found message, the dispatcher a pressed button's message
is offered to, the settings it reads. Send imports nothing of receive (an import-linter contract)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.memory.feed.archive import ArchiveResult, MessageRecord


class Archive(Protocol):
    """The receive pipeline (``receive/pipeline.py``): every message, ours too, is archived through it."""

    async def message(
        self,
        record: MessageRecord,
        *,
        chat: ChatInfo | None = None,
        users: Sequence[UserInfo] = (),
        incoming: IncomingMessage | None = None,
    ) -> ArchiveResult: ...

    async def submit(
        self,
        record: MessageRecord,
        *,
        chat: ChatInfo | None = None,
        users: Sequence[UserInfo] = (),
        incoming: IncomingMessage | None = None,
    ) -> asyncio.Future[ArchiveResult]: ...

    async def edit(
        self, record: MessageRecord, *, chat: ChatInfo | None = None, users: Sequence[UserInfo] = ()
    ) -> ArchiveResult: ...

    async def delete(self, chat_id: int | None, message_ids: Sequence[int]) -> int: ...


class Updates(Protocol):
    """The update handlers (``receive/handlers.py``): the input peers they saw, a message's records."""

    peers: dict[int, Any]

    def records(self, msg: Any) -> tuple[ChatInfo, list[UserInfo], UserInfo | None, MessageRecord]: ...


class Offers(Protocol):
    """The dispatcher (``receive/dispatch.py``): a message offered to the agent, and its verdict."""

    def offer(self, msg: IncomingMessage, *, accepted: bool = False, again: bool = False) -> Any: ...


class SendSettings(Protocol):
    """The gateway's settings (``telegram/gateway.py``, ``GatewaySettings``) the sends read."""

    @property
    def mode(self) -> str: ...  # user | bot

    @property
    def flood_wait_max_s(self) -> float: ...

    @property
    def stream_edits(self) -> bool: ...
