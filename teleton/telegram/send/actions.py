"""The Telethon implementation of the Gateway contract's actions: what the agent and its tools may do.

Every action goes through ``_call``: FloodWait is slept and retried (bounded), and any Telegram error becomes
a ``GatewayError`` the agent can report, never an exception that takes the daemon down. Sent messages are
archived as ours, so the next turn sees them as context. ``TelegramGateway`` (the life cycle) builds on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import structlog
from telethon import TelegramClient, errors, functions, utils
from telethon.tl import types

from teleton.gateway.contract import (
    ChatAction,
    ChatInfo,
    GatewayError,
    IncomingMessage,
    SendOptions,
    SendsMessages,
    SentMessage,
    UserInfo,
)
from teleton.telegram import convert
from teleton.telegram.flood import with_flood_retry
from teleton.telegram.send.approvals import inline_buttons
from teleton.telegram.send.chat_tools import ChatToolActions
from teleton.telegram.send.ports import Archive, Offers, SendSettings, Updates
from teleton.telegram.send.sending import Delivered, send_once, send_request, tl_entity
from teleton.telegram.send.split import Part, plan_reply, split_text
from teleton.telegram.send.streaming import StreamingActions

log = structlog.get_logger(__name__)
T = TypeVar("T")
TRANSCRIBE_POLLS = 6

_BIG_TEXT = 50_000  # replies longer than this are prepared on a worker thread
CHOICE_TEXT_MAX = 4000  # a message with buttons is one message: longer text goes first on its own


def plain_parts(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at line ends where it can be; nothing dropped."""
    parts: list[str] = []
    rest = text or " "
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit)
        cut = cut + 1 if cut > limit // 2 else limit
        parts.append(rest[:cut])
        rest = rest[cut:]
    return [*parts, rest]


class TelegramActions(ChatToolActions, StreamingActions, SendsMessages):
    client: TelegramClient
    settings: SendSettings
    pipeline: Archive
    handlers: Updates
    dispatcher: Offers | None
    me: UserInfo | None
    _sleep: Callable[[float], Awaitable[None]]

    async def _send(self, chat_id: int, text: str, options: SendOptions) -> SentMessage:
        if options.plain:
            parts = split_text(text)
        elif len(text) > _BIG_TEXT:
            parts = await asyncio.to_thread(plan_reply, text)
        else:
            parts = plan_reply(text)
        if not parts:
            raise GatewayError("cannot send an empty message")
        once = options.once
        reply_to, topic_id = options.reply_to, options.topic_id
        if once.edits is not None and once.parts_sent == 0:  # a streamed answer (or a re-answer): part 0 is an edit
            return await self.stream_finish(
                chat_id, once.edits, text, once=once, parts=parts, reply_to=reply_to, topic_id=topic_id
            )
        peer = await self._input_peer(chat_id)
        ids: list[int] = []
        for i, part in enumerate(parts):
            if i < once.parts_sent:
                continue
            answer_to = reply_to if i == 0 else None
            sent = await self._send_part(peer, part, answer_to, once.random_base + i, topic_id)
            ids.append(sent.id)
            if sent.id:
                await self._archive_sent(chat_id, sent.id, sent.date, part.text, answer_to, topic_id)
            if once.confirm is not None:
                await once.confirm(i + 1)
        return SentMessage(chat_id, next((i for i in ids if i), 0), text, tuple(i for i in ids if i))

    async def send_choice(self, chat_id: int, text: str, choices: Sequence[tuple[str, str]]) -> SentMessage:
        """Plain text, never rendered (a link's address must not hide behind its text), in as many messages
        as it takes; buttons on the last one with a bot account (see ``approvals``)."""
        peer = await self._peer(chat_id)
        buttons = inline_buttons(choices) if self.settings.mode == "bot" else None
        first: SentMessage | None = None
        parts = plain_parts(text, CHOICE_TEXT_MAX)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1

            def send(part: str = part, last: bool = last) -> Awaitable[Any]:
                return self.client.send_message(
                    peer, part, parse_mode=None, link_preview=False, buttons=buttons if last else None
                )

            message = await self._call(send, "send message")
            date = message.date.timestamp() if getattr(message, "date", None) else 0.0
            await self._archive_sent(chat_id, int(message.id), date, part, None)
            first = first or SentMessage(chat_id=chat_id, message_id=int(message.id), text=text)
        assert first is not None
        return first

    def _offer(self, msg: IncomingMessage) -> Any:
        return None if self.dispatcher is None else self.dispatcher.offer(msg)

    async def _input_peer(self, chat_id: int) -> Any:
        peer = await self._peer(chat_id)
        return await self._call(lambda: self.client.get_input_entity(peer), "resolve chat")

    async def _send_part(
        self, peer: Any, part: Part, reply_to: int | None, random_id: int, topic_id: int | None = None
    ) -> Delivered:
        """One part with its own ``random_id`` (``sending``): Telegram refuses it a second time."""
        entities = [tl_entity(s) for s in part.spans]

        def call(fn: Callable[[], Awaitable[Any]]) -> Awaitable[Any]:
            return self._call(fn, "send message")

        if entities:
            try:
                return await send_once(self.client, call, peer, send_request(peer, part.text, entities, reply_to,
                                                                             random_id, topic_id))  # fmt: skip
            except GatewayError as exc:
                if not isinstance(exc.__cause__, errors.BadRequestError):
                    raise
                # Formatting must never cost the user the reply: send the same words unformatted.
                log.warning("formatting_rejected", error=str(exc))
        request = send_request(peer, part.text, [], reply_to, random_id, topic_id)
        return await send_once(self.client, call, peer, request)

    async def edit_message(self, chat_id: int, message_id: int, text: str) -> None:
        part = plan_reply(text, max_parts=1)[0] if text.strip() else None
        if part is None:
            raise GatewayError("cannot edit a message to empty text")
        peer = await self._peer(chat_id)
        edited = await self._call(
            lambda: self.client.edit_message(
                peer,
                message_id,
                part.text,
                formatting_entities=[tl_entity(s) for s in part.spans],
                parse_mode=None,
                link_preview=False,
            ),
            "edit message",
        )
        # The archive follows our own edits too: a held forward of this message must see that it changed.
        me = self.me
        if isinstance(edited, types.Message):
            record = convert.message_record(edited, chat_id, me.id if me else None, me.display_name if me else "")
            try:
                await self.pipeline.edit(record)
            except Exception as exc:
                log.error("archive_edit_failed", chat_id=chat_id, error=str(exc))

    async def delete_messages(self, chat_id: int, message_ids: Sequence[int]) -> None:
        peer = await self._peer(chat_id)
        await self._call(lambda: self.client.delete_messages(peer, list(message_ids)), "delete messages")
        await self.pipeline.delete(None if chat_id > -(10**12) else chat_id, list(message_ids))

    async def forward_message(self, from_chat_id: int, message_id: int, to_chat_id: int) -> SentMessage:
        src, dst = await self._peer(from_chat_id), await self._peer(to_chat_id)
        msg = await self._call(lambda: self.client.forward_messages(dst, message_id, src), "forward message")
        msg = msg[0] if isinstance(msg, list) else msg
        return SentMessage(chat_id=to_chat_id, message_id=int(msg.id), text=getattr(msg, "message", "") or "")

    async def pin_message(self, chat_id: int, message_id: int, *, unpin: bool = False) -> None:
        peer = await self._peer(chat_id)
        if unpin:
            await self._call(lambda: self.client.unpin_message(peer, message_id), "unpin message")
        else:
            await self._call(lambda: self.client.pin_message(peer, message_id, notify=False), "pin message")

    async def react(self, chat_id: int, message_id: int, emoji: str) -> None:
        peer = await self._peer(chat_id)
        request = functions.messages.SendReactionRequest(
            peer=peer, msg_id=message_id, reaction=[types.ReactionEmoji(emoticon=emoji)]
        )
        await self._call(lambda: self.client(request), "react")

    async def send_poll(self, chat_id: int, question: str, options: Sequence[str]) -> SentMessage:
        if not 2 <= len(options) <= 10:
            raise GatewayError("a poll needs 2 to 10 options")
        peer = await self._peer(chat_id)
        poll = types.InputMediaPoll(
            poll=types.Poll(
                id=0,
                question=types.TextWithEntities(question, []),
                answers=[types.PollAnswer(types.TextWithEntities(o, []), bytes([i])) for i, o in enumerate(options)],
                hash=0,  # a new poll has no hash yet
            )
        )
        msg = await self._call(lambda: self.client.send_message(peer, file=poll), "send poll")
        return SentMessage(chat_id=chat_id, message_id=int(msg.id), text=question)

    async def send_file(
        self, chat_id: int, path: Path, *, caption: str = "", voice_note: bool = False, reply_to: int | None = None
    ) -> SentMessage:
        if not await asyncio.to_thread(Path(path).is_file):
            raise GatewayError(f"no such file: {path}")
        peer = await self._peer(chat_id)
        msg = await self._call(
            lambda: self.client.send_file(
                peer, str(path), caption=caption[:1024], voice_note=voice_note, reply_to=reply_to
            ),
            "send file",
        )
        return SentMessage(chat_id=chat_id, message_id=int(msg.id), text=caption)

    async def download_media(self, chat_id: int, message_id: int, dest_dir: Path, max_bytes: int) -> Path:
        peer = await self._peer(chat_id)
        msg = await self._call(lambda: self.client.get_messages(peer, ids=message_id), "get message")
        if msg is None or msg.media is None:
            raise GatewayError("that message has no media")
        size = getattr(getattr(msg, "file", None), "size", None) or 0
        if size > max_bytes:
            raise GatewayError(f"media is {size} bytes, over the {max_bytes} byte limit")
        await asyncio.to_thread(Path(dest_dir).mkdir, parents=True, exist_ok=True)
        # An animated or video sticker (TGS, WebM) is read through its still thumbnail, the largest one.
        thumb = -1 if convert.media_kind(msg) == "sticker" and not _mime(msg).startswith("image/") else None
        out = await self._call(
            lambda: self.client.download_media(msg, file=str(dest_dir), thumb=thumb), "download media"
        )
        if not out:
            raise GatewayError("download failed")
        return Path(out)

    async def transcribe_audio(self, chat_id: int, message_id: int) -> str:
        """Telegram's own transcription of a voice or video note (Premium accounts, or a trial's free ones).
        A transcription still pending is asked for again, a few times, before giving up."""
        peer = await self._peer(chat_id)
        for attempt in range(TRANSCRIBE_POLLS):
            result = await self._call(
                lambda: self.client(functions.messages.TranscribeAudioRequest(peer=peer, msg_id=message_id)),
                "transcribe audio",
            )
            if not result.pending:
                return str(result.text or "")
            await self._sleep(min(2.0 * (attempt + 1), 10.0))
        raise GatewayError("Telegram's transcription is still pending; try again later")

    async def get_chat(self, chat_id: int) -> ChatInfo:
        entity = await self._call(lambda: self.client.get_entity(chat_id), "get chat")
        peer = utils.get_peer(entity)
        return convert.chat_record(chat_id, convert.chat_type(peer, entity), entity)

    async def get_user(self, user: int | str) -> UserInfo:
        entity = await self._call(lambda: self.client.get_entity(user), "get user")
        if not isinstance(entity, types.User):
            raise GatewayError(f"{user} is not a user")
        return convert.user_record(entity)

    async def list_dialogs(self, limit: int = 50) -> list[ChatInfo]:
        dialogs = await self._call(lambda: self.client.get_dialogs(limit=limit), "list dialogs")
        out = []
        for d in dialogs:
            peer = utils.get_peer(d.entity)
            out.append(convert.chat_record(int(d.id), convert.chat_type(peer, d.entity), d.entity))
        return out

    async def get_participants(self, chat_id: int, limit: int = 200) -> list[UserInfo]:
        peer = await self._peer(chat_id)
        users = await self._call(lambda: self.client.get_participants(peer, limit=limit), "get participants")
        return [convert.user_record(u) for u in users]

    async def kick(self, chat_id: int, user_id: int) -> None:
        peer = await self._peer(chat_id)
        await self._call(lambda: self.client.kick_participant(peer, user_id), "kick")

    async def ban(self, chat_id: int, user_id: int, *, unban: bool = False) -> None:
        peer = await self._peer(chat_id)
        await self._call(
            lambda: self.client.edit_permissions(peer, user_id, view_messages=unban), "unban" if unban else "ban"
        )

    async def typing(self, chat_id: int, topic_id: int | None = None, action: ChatAction = "typing") -> None:
        peer = await self._peer(chat_id)
        shown = types.SendMessageRecordAudioAction() if action == "record_audio" else types.SendMessageTypingAction()
        request = functions.messages.SetTypingRequest(peer=peer, action=shown, top_msg_id=topic_id)
        await self._call(lambda: self.client(request), "typing", attempts=1)  # cosmetic: never wait for it

    # ---- plumbing -----------------------------------------------------------------------------------

    async def _peer(self, chat_id: int) -> Any:
        peer = self.handlers.peers.get(chat_id)
        if peer is not None:
            return peer
        return await self._call(lambda: self.client.get_input_entity(chat_id), "resolve chat")

    async def _call(self, call: Callable[[], Awaitable[T]], what: str, *, attempts: int = 3) -> T:
        try:
            return await with_flood_retry(
                call, max_wait_s=self.settings.flood_wait_max_s, attempts=attempts, what=what, sleep=self._sleep
            )
        except GatewayError:
            raise
        except errors.RPCError as exc:
            raise GatewayError(f"{what} failed: {exc.message or type(exc).__name__}") from exc
        except ValueError as exc:  # Telethon: unknown entity, bad argument
            raise GatewayError(f"{what} failed: {exc}") from exc
        except ConnectionError as exc:
            raise GatewayError(f"{what} failed: not connected to Telegram") from exc


def _mime(msg: Any) -> str:
    return str(getattr(getattr(msg, "file", None), "mime_type", None) or "")
