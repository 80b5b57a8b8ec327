"""A reply shown while it is written: one message, sent at the first words and edited as text arrives.

Telegram limits edits as it limits sends, so a chat gets at most one change of its streamed message per
``stream_interval_s`` (1 s) by a monotonic clock (``stream_clock``, replaced in tests), counted per chat
across turns. The words in between are plain text; the final edit is the reply's first part, formatted,
and the rest of a long reply follows as the usual split messages. A FloodWait on an intermediate edit is
not waited out: the stream stops (``StreamHalted``) and the final text goes out in one piece, waiting as a
send does. The reply itself arrives through ``send_message`` with ``Once.edits`` naming the streamed message
(``stream_finish``), live and when recovery sends it again; ``teleton/agent/delivery/streaming.py`` says
what is recorded when, and what a restart does with it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
from telethon import TelegramClient, errors

from teleton.gateway.contract import ChatInfo, GatewayError, Once, SentMessage, StreamHalted
from teleton.telegram.send.archived import ArchivesSent
from teleton.telegram.send.ports import SendSettings
from teleton.telegram.send.sending import Delivered, send_once, send_request, tl_entities
from teleton.telegram.send.split import TELEGRAM_LIMIT, Part, utf16_len

log = structlog.get_logger(__name__)
T = TypeVar("T")

STREAM_INTERVAL_S = 1.0
_KEPT_CHATS = 256  # per-chat edit times kept (older ones are dropped: they no longer limit anything)


class StreamingActions(ArchivesSent):
    client: TelegramClient
    settings: SendSettings
    _sleep: Callable[[float], Awaitable[None]]
    stream_interval_s: float = STREAM_INTERVAL_S

    # What ``TelegramActions`` provides.
    async def _input_peer(self, chat_id: int) -> Any:
        raise NotImplementedError

    async def _call(self, call: Callable[[], Awaitable[T]], what: str, *, attempts: int = 3) -> T:
        raise NotImplementedError

    async def _send_part(
        self, peer: Any, part: Part, reply_to: int | None, random_id: int, topic_id: int | None = None
    ) -> Delivered:
        raise NotImplementedError

    def stream_clock(self) -> float:
        return time.monotonic()

    def streams_to(self, chat: ChatInfo) -> bool:
        """Private chats only (``telegram.stream_edits``): see docs/operations.md, "Streaming"."""
        return bool(self.settings.stream_edits) and chat.type == "dm"

    async def stream_start(self, chat_id: int, text: str, *, random_id: int) -> int:
        if utf16_len(text) > TELEGRAM_LIMIT:
            raise StreamHalted("the first words are longer than one message")
        peer = await self._input_peer(chat_id)
        request = send_request(peer, text, [], None, random_id)
        delivered = await send_once(self.client, self._once("stream reply"), peer, request)
        self._changed(chat_id)
        if not delivered.id:
            raise StreamHalted("the streamed message's id is not known")
        return delivered.id

    async def stream_edit(self, chat_id: int, message_id: int, text: str) -> bool:
        if utf16_len(text) > TELEGRAM_LIMIT:
            raise StreamHalted("the reply is longer than one message")
        if self._wait_s(chat_id) > 0:
            return False
        peer = await self._input_peer(chat_id)
        self._changed(chat_id)  # before the call: a refused edit counts against the limit too
        try:
            await self._once("stream edit")(lambda: self._edit(peer, message_id, text, []))
        except GatewayError as exc:
            if isinstance(exc.__cause__, errors.MessageNotModifiedError):
                return True
            asked = int(getattr(exc.__cause__, "seconds", 0) or 0)
            if asked:  # the final edit waits as long as Telegram asked
                self._edits()[chat_id] = self.stream_clock() + asked - self.stream_interval_s
            log.info("stream_halted", chat_id=chat_id, reason=str(exc))
            raise StreamHalted(str(exc)) from exc
        return True

    async def stream_finish(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        *,
        once: Once,
        parts: list[Part],
        reply_to: int | None = None,
        topic_id: int | None = None,
    ) -> SentMessage:
        """``send_message`` of a streamed answer (or of a re-answer: ``message_id`` is the old reply): that
        message edited into part 0, then the other parts sent with ``once``'s ids. A message that cannot be
        edited (the user deleted it, or Telegram asks a longer pause than ``flood_wait_max_s``) is replaced:
        part 0 goes out as a new message with ``random_base`` (sent again after a crash, Telegram refuses
        it as a duplicate), replying to ``reply_to``, in forum topic ``topic_id`` like the parts after it."""
        peer = await self._input_peer(chat_id)
        first = message_id
        if await self._edited_in(chat_id, peer, message_id, parts[0]):
            await self._archive_sent(chat_id, message_id, time.time(), parts[0].text, None, topic_id, edited=True)
        else:
            sent = await self._send_part(peer, parts[0], reply_to, once.random_base, topic_id)
            first = sent.id
            if sent.id:
                await self._archive_sent(chat_id, sent.id, sent.date, parts[0].text, reply_to, topic_id)
        if once.confirm is not None:
            await once.confirm(1)
        ids = [first]
        for i in range(1, len(parts)):
            sent = await self._send_part(peer, parts[i], None, once.random_base + i, topic_id)
            ids.append(sent.id)
            if sent.id:
                await self._archive_sent(chat_id, sent.id, sent.date, parts[i].text, None, topic_id)
            if once.confirm is not None:
                await once.confirm(i + 1)
        return SentMessage(chat_id, first, text, tuple(i for i in ids if i))

    async def stream_drop(self, chat_id: int, message_id: int) -> None:
        peer = await self._input_peer(chat_id)  # never archived: only the final edit is
        await self._call(lambda: self.client.delete_messages(peer, [message_id]), "delete streamed reply")

    # ---- plumbing -----------------------------------------------------------------------------------

    async def _edited_in(self, chat_id: int, peer: Any, message_id: int, part: Part) -> bool:
        """Whether the streamed message now holds ``part``; False: it is gone, or deleted here because
        Telegram asked for a longer pause than a reply waits (the reply then goes out as a new message)."""
        wait = self._wait_s(chat_id)
        if wait > self.settings.flood_wait_max_s:
            log.info("stream_replaced", chat_id=chat_id, reason=f"asked to wait {int(wait)} s before an edit")
            try:
                await self.stream_drop(chat_id, message_id)
            except GatewayError as exc:  # the words stay beside the answer: rare, and said
                log.warning("stream_not_deleted", chat_id=chat_id, error=str(exc))
            return False
        if wait > 0:  # the last change was a moment ago (or Telegram asked for a pause): the final one waits
            await self._sleep(wait)
        try:
            await self._final_edit(peer, message_id, part)
        except GatewayError as exc:
            if not isinstance(exc.__cause__, _GONE):
                raise
            log.info("stream_message_gone", chat_id=chat_id, error=str(exc))
            return False
        finally:
            self._changed(chat_id)
        return True

    async def _final_edit(self, peer: Any, message_id: int, part: Part) -> None:
        """The streamed message as the reply's first part; formatting rejected, the same words plain."""
        if part.spans:
            try:
                await self._call(lambda: self._edit(peer, message_id, part.text, tl_entities(part.spans)), "edit reply")
                return
            except GatewayError as exc:
                if not isinstance(exc.__cause__, errors.BadRequestError) or _unchanged(exc):
                    raise
                log.warning("formatting_rejected", error=str(exc))
        try:
            await self._call(lambda: self._edit(peer, message_id, part.text, []), "edit reply")
        except GatewayError as exc:
            if not _unchanged(exc):  # already these words (a plain reply that streamed whole)
                raise

    def _edit(self, peer: Any, message_id: int, text: str, entities: list[Any]) -> Awaitable[Any]:
        return self.client.edit_message(
            peer, message_id, text, formatting_entities=entities, parse_mode=None, link_preview=False
        )

    def _once(self, what: str) -> Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]:
        """One try, FloodWait not waited out: a stream gives up its edits rather than hold the reply."""
        return lambda fn: self._call(fn, what, attempts=1)

    def _edits(self) -> dict[int, float]:
        found: dict[int, float] | None = getattr(self, "_stream_edits", None)
        if found is None:
            found = {}
            self._stream_edits = found
        return found

    def _wait_s(self, chat_id: int) -> float:
        last = self._edits().get(chat_id)
        return 0.0 if last is None else max(0.0, last + self.stream_interval_s - self.stream_clock())

    def _changed(self, chat_id: int) -> None:
        edits, now = self._edits(), self.stream_clock()
        if len(edits) >= _KEPT_CHATS:
            for old in [c for c, at in edits.items() if now - at >= self.stream_interval_s]:
                del edits[old]
        edits[chat_id] = now


# What editing a message that is no longer there (or no longer ours to edit) answers.
_GONE = (errors.MessageIdInvalidError, errors.MessageEditTimeExpiredError, errors.MessageAuthorRequiredError)


def _unchanged(exc: GatewayError) -> bool:
    return isinstance(exc.__cause__, errors.MessageNotModifiedError)
