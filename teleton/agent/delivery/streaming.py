"""A private chat's answer shown while the model writes it, without giving up "exactly once" (docs/operations.md,
"Streaming": every restart point and what it leaves).

The text arrives through ``Progress``; after a few words (or a second) the first message goes out and its id is
recorded at once (``Delivery.stream_shown``), then it is edited as text arrives. The reply stage records the reply
naming that message (``Once.edits``) and the gateway edits it into the reply's first part; a turn that answers
again after a restart takes it over (``stream_left``). A tool call or a retry starts the shown text again; tool
calls and their results never stream.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from teleton.agent.delivery.records import Delivery
from teleton.gateway.contract import GatewayError, ReplyStreams
from teleton.llm.progress import Progress
from teleton.storage.reply_sends import new_random_base

log = structlog.get_logger(__name__)

START_CHARS = 24  # words enough to be worth a message; fewer go out once a second has passed


class StreamedReply:
    """One turn's streamed message: started (or taken over from a turn a restart cut), edited, then
    handed to the reply stage (``end``) or deleted (``drop``). ``live`` False: nothing is shown while the
    model writes (streaming turned off), but a message a cut turn left is still finished."""

    def __init__(self, gateway: ReplyStreams, delivery: Delivery, chat_id: int, *, live: bool = True) -> None:
        self.gateway = gateway
        self.delivery = delivery
        self.chat_id = chat_id
        self.live = live
        self.text = ""  # what the model has written since the last restart
        self.shown = ""
        self.message_id = 0
        self.started = False
        self.halted = not live
        self._first_at: float | None = None
        self._changed_at = 0.0  # when the message last changed, by the gateway's clock
        self._busy: asyncio.Task[None] | None = None

    async def take_over(self) -> None:
        """A message a turn cut by a restart streamed for these messages becomes this one's."""
        try:
            left = await self.delivery.stream_left()
        except Exception as exc:  # the answer then goes out as a new message; the old words stay
            log.warning("stream_not_taken_over", chat_id=self.chat_id, error=f"{type(exc).__name__}: {exc}")
            return
        if left is not None:
            self.message_id, self.started = left, True
            log.info("stream_taken_over", chat_id=self.chat_id, message_id=left)

    def progress(self) -> Progress:
        return Progress(text=self.piece, tool=lambda name, arguments: self.restart(), retry=self._retried)

    # -- pieces, as the model writes them (called on the event loop, never awaited) --------------------
    def piece(self, piece: str) -> None:
        self.text += piece
        now, interval = self.gateway.stream_clock(), self.gateway.stream_interval_s
        if self._first_at is None:
            self._first_at = now
        if self.halted or (self._busy is not None and not self._busy.done()) or not self.text.strip():
            return
        if not self.started:
            if len(self.text.strip()) >= START_CHARS or now - self._first_at >= interval:
                self.started = True
                self._busy = asyncio.create_task(self._start(self.text))
        elif self.message_id and self.text != self.shown and now - self._changed_at >= interval:
            self._busy = asyncio.create_task(self._edit(self.text))

    def restart(self) -> None:
        """What follows replaces what was written so far (a tool call, a retry, a new attempt)."""
        self.text = ""

    def _retried(self, attempt: int, wait_s: float, reason: str) -> None:
        self.restart()

    async def _start(self, text: str) -> None:
        try:  # a fresh random_id: the first words are never sent again (a restart edits this message)
            message_id = await self.gateway.stream_start(self.chat_id, text, random_id=new_random_base())
        except Exception as exc:  # never the turn's failure: the reply goes out whole instead
            self._halt("stream_not_started", exc)
            return
        self.message_id, self.shown, self._changed_at = message_id, text, self.gateway.stream_clock()
        try:
            await self.delivery.stream_shown(message_id)
        except Exception as exc:  # unrecorded, it is not edited again before the reply
            self._halt("stream_not_recorded", exc)

    async def _edit(self, text: str) -> None:
        try:
            if await self.gateway.stream_edit(self.chat_id, self.message_id, text):
                self.shown, self._changed_at = text, self.gateway.stream_clock()
        except Exception as exc:
            self._halt("stream_halted", exc)

    def _halt(self, event: str, exc: Exception) -> None:
        self.halted = True
        level = log.info if isinstance(exc, GatewayError) else log.warning
        level(event, chat_id=self.chat_id, error=f"{type(exc).__name__}: {exc}")

    def abandon(self) -> None:
        """The turn ends here without a reply stage: nothing more goes out (what was shown stays)."""
        self.halted = True
        if self._busy is not None:
            self._busy.cancel()

    # -- the end, from the reply stage --------------------------------------------------------------------
    async def settle(self) -> None:
        """No more pieces: wait for the change under way."""
        self.halted = True
        if self._busy is not None:
            with contextlib.suppress(Exception):
                await self._busy

    async def end(self) -> int | None:
        """The message the reply's first part is edited into (``Delivery.sending(edits=)``); None: nothing
        was shown, the reply goes out as a new message."""
        await self.settle()
        return self.message_id or None

    async def drop(self) -> None:
        """The turn ends with no reply here: the streamed words go."""
        await self.settle()
        if not self.message_id:
            return
        try:
            await self.gateway.stream_drop(self.chat_id, self.message_id)
        except Exception as exc:  # the words stay; nothing is owed through them
            log.warning("stream_not_deleted", chat_id=self.chat_id, error=f"{type(exc).__name__}: {exc}")
        await self.delivery.stream_gone(self.message_id)
        self.message_id = 0
