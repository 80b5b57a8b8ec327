"""A chat network on a local socket: the daemon's test transport (reliability tests, the soak script).

No fake MTProto server exists for Telethon, so process-level tests drive the real daemon through this: JSON
lines on a Unix socket go through the receive path Telegram messages take, each acknowledged after its commit,
and every action the agent takes is written back as a line.
In:  {"op": "message", "chat": {...ChatInfo}, "sender": {...UserInfo}, "message_id": 1, "text": "hi", "date": 1.7e9,
      "mentions_us": false, "reply_to_id": null, "topic_id": null, "media": {"kind": "photo", "path": ...}}
Out: {"op": "archived", "chat_id": 1, "message_id": 1, "new": true}, {"op": "send_message", ...}, ...
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog

from teleton.daemon.loopback_chats import LoopbackChats
from teleton.gateway.contract import (
    ChatAction,
    ChatInfo,
    GatewayError,
    IncomingMessage,
    MediaInfo,
    SendOptions,
    SentMessage,
    UserInfo,
)
from teleton.gateway.local import TextStandIns, copy_media
from teleton.memory.feed import archive as fa
from teleton.storage import Database
from teleton.storage.reply_sends import new_random_base
from teleton.telegram import convert
from teleton.telegram.gateway import GatewaySettings, WiresTheAgent
from teleton.telegram.receive.archiver import ArchiveBatcher
from teleton.telegram.receive.dispatch import Dispatcher
from teleton.telegram.receive.pipeline import FeedPipeline
from teleton.telegram.send.split import TELEGRAM_LIMIT, split_text

log = structlog.get_logger(__name__)

ME = UserInfo(id=777_000_001, first_name="Teleton", username="teleton_agent", is_bot=False)
MAX_LINE = 16 * 1024 * 1024
CHATS_KEPT = 2_000  # chats get_chat and list_dialogs know (a soak walks through 20,000)
UNHEARD_MAX = 10_000  # events kept for the first listener


class LoopbackGateway(TextStandIns, WiresTheAgent):
    def __init__(self, socket_path: Path, db: Database, settings: GatewaySettings) -> None:
        self.socket_path = socket_path
        self.db = db
        self.settings = settings
        self.me: UserInfo | None = ME
        self.batcher = ArchiveBatcher(db)
        self.pipeline = FeedPipeline(db, self.batcher, deleted_messages=settings.deleted_messages)
        self.dispatcher: Dispatcher | None = None
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.chats = LoopbackChats(socket_path.with_name(socket_path.name + ".received.jsonl"))
        self._chats: OrderedDict[int, ChatInfo] = OrderedDict()  # the most recently active, like dialogs
        self._unheard: deque[bytes] = deque(maxlen=UNHEARD_MAX)
        self._files: OrderedDict[tuple[int, int], Path] = OrderedDict()  # (chat, message) -> its media file
        self._scheduled: dict[int, dict[int, tuple[float, str]]] = {}  # chat -> scheduled id -> (when, text)
        self._scheduled_ids = itertools.count(1)  # Telegram numbers a chat's scheduled messages apart from the rest

    # ---- wiring and life cycle (as TelegramGateway) -------------------------------------------------

    async def start(self, supervisor: Any = None) -> None:
        self.chats.open()
        self.batcher.start()
        if self.dispatcher is not None:
            await self.pipeline.recover(self.settings.recovery_window_s, ME)
        self.socket_path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.socket_path), limit=MAX_LINE)
        log.info("loopback_gateway_listening", socket=str(self.socket_path))

    async def stop(self, grace_s: float = 5.0) -> None:
        if self._server is not None:
            self._server.close()
        if self.dispatcher is not None:
            await self.dispatcher.close(grace_s)
        await self.pipeline.settle()
        await self.batcher.close()
        for writer in list(self._writers):
            writer.close()
        self.chats.close()
        self.socket_path.unlink(missing_ok=True)

    # ---- incoming ---------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        while self._unheard:  # what happened before anyone listened (replies of recovered turns)
            writer.write(self._unheard.popleft())
        try:
            while line := await reader.readline():
                try:
                    event = json.loads(line)
                    if event.get("op") == "message":
                        await self._incoming(event)
                    elif event.get("op") == "edit":
                        await self._edited(int(event["chat_id"]), int(event["message_id"]), str(event["text"]))
                    else:
                        self._emit({"op": "error", "error": f"unknown op {event.get('op')!r}"})
                except (ValueError, KeyError, TypeError, OverflowError) as exc:
                    # One error event for one bad line; the connection stays (Telegram drops a bad update).
                    self._emit({"op": "error", "error": f"bad event: {type(exc).__name__}: {exc}"})
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)

    async def _incoming(self, event: dict[str, Any]) -> None:
        chat = ChatInfo(**event["chat"])
        sender = UserInfo(**event["sender"]) if event.get("sender") else None
        self._chats[chat.id] = chat
        self._chats.move_to_end(chat.id)
        while len(self._chats) > CHATS_KEPT:
            self._chats.popitem(last=False)
        record = fa.MessageRecord(
            chat_id=_int64(chat.id),
            message_id=_int64(event["message_id"]),
            date=float(event.get("date") or time.time()),
            text=str(event.get("text") or ""),
            sender_id=sender.id if sender else None,
            sender_name=sender.display_name if sender else "",
            reply_to_id=event.get("reply_to_id"),
            fwd_from=event.get("fwd_from"),
            topic_id=_int64(event["topic_id"]) if event.get("topic_id") else None,
        )
        media = self._media(chat.id, record.message_id, event.get("media"))
        if media is not None:
            record = replace(record, media_kind=media.kind)
        incoming = convert.incoming(
            chat, sender, record, mentions=bool(event.get("mentions_us")), reply_to_us=False, media=media
        )
        users = [UserInfo(sender.id, sender.first_name, sender.last_name, sender.username)] if sender else []
        result = await self.pipeline.message(
            record, chat=ChatInfo(chat.id, chat.type, chat.title), users=users, incoming=incoming
        )
        self._emit({"op": "archived", "chat_id": chat.id, "message_id": record.message_id, "new": result.new})

    async def _edited(self, chat_id: int, message_id: int, text: str) -> None:
        """A message's new text (its sender edited it): the archive keeps the latest, as with Telegram."""
        now = time.time()
        record = fa.MessageRecord(chat_id=chat_id, message_id=message_id, date=now, text=text, edit_date=now)
        await self.pipeline.edit(record)
        self._emit({"op": "edited", "chat_id": chat_id, "message_id": message_id})

    def _media(self, chat_id: int, message_id: int, media: dict[str, Any] | None) -> MediaInfo | None:
        if not media:
            return None
        self._files[(chat_id, message_id)] = Path(media["path"])
        while len(self._files) > CHATS_KEPT:
            self._files.popitem(last=False)
        fields = {k: media[k] for k in ("size", "mime_type", "file_name", "duration_s") if k in media}
        return MediaInfo(kind=str(media["kind"]), **fields)

    def _emit(self, event: dict[str, Any]) -> None:
        line = (json.dumps(event, ensure_ascii=False) + "\n").encode()
        if not any(not w.is_closing() for w in self._writers):
            self._unheard.append(line)
            return
        for writer in list(self._writers):
            if writer.is_closing():
                self._writers.discard(writer)
                continue
            writer.write(line)

    async def _send(self, chat_id: int, text: str, options: SendOptions) -> SentMessage:
        """Each part as Telegram does it: received by the chat (deduplicated by ``random_id``), then emitted
        (``plain``: to be shown as it is, not as Markdown) and archived as ours; parts ``once`` knows delivered
        are skipped."""
        if not text.strip():
            raise GatewayError("cannot send an empty message")
        once = options.once
        reply_to, topic, plain = options.reply_to, options.topic_id, options.plain
        parts = [p.text for p in split_text(text)] if len(text) > TELEGRAM_LIMIT else [text]
        ids: list[int] = []
        for i, part in enumerate(parts):
            if i < once.parts_sent:
                continue
            answer_to = reply_to if i == 0 else None
            received = self.chats.receive(once.random_base + i, chat_id, part, answer_to, topic)
            if not received.duplicate:
                self._emit({"op": "send_message", "chat_id": chat_id, "text": part, "reply_to": answer_to,
                            "topic_id": topic, "message_id": received.message_id, "plain": plain})  # fmt: skip
            record = fa.MessageRecord(
                chat_id=chat_id, message_id=received.message_id, date=time.time(), text=part, sender_id=ME.id,
                sender_name=ME.display_name, is_outgoing=True, reply_to_id=answer_to, topic_id=topic,
            )  # fmt: skip
            await self.pipeline.message(record)
            ids.append(received.message_id)
            if once.confirm is not None:
                await once.confirm(i + 1)
        return SentMessage(chat_id, ids[0] if ids else 0, text, tuple(ids))

    def _action(self, name: str, **fields: Any) -> None:
        self._emit({"op": name, **fields})

    # ---- the Gateway protocol -----------------------------------------------------------------------

    async def send_choice(self, chat_id: int, text: str, choices: Sequence[tuple[str, str]]) -> SentMessage:
        return await self.send_message(chat_id, text, plain=True)  # the text names the commands to type

    async def edit_message(self, chat_id: int, message_id: int, text: str) -> None:
        await self._edited(chat_id, message_id, text)
        self._action("edit_message", chat_id=chat_id, message_id=message_id, text=text)

    async def delete_messages(self, chat_id: int, message_ids: Sequence[int]) -> None:
        await self.pipeline.delete(chat_id, list(message_ids))
        self._action("delete_messages", chat_id=chat_id, message_ids=list(message_ids))

    async def forward_message(self, from_chat_id: int, message_id: int, to_chat_id: int) -> SentMessage:
        received = self.chats.receive(new_random_base(), to_chat_id, f"[forwarded {from_chat_id}/{message_id}]", None)
        self._action("forward_message", from_chat_id=from_chat_id, message_id=message_id, to_chat_id=to_chat_id)
        return SentMessage(to_chat_id, received.message_id, "")

    async def pin_message(self, chat_id: int, message_id: int, *, unpin: bool = False) -> None:
        self._action("pin_message", chat_id=chat_id, message_id=message_id, unpin=unpin)

    async def react(self, chat_id: int, message_id: int, emoji: str) -> None:
        self._action("react", chat_id=chat_id, message_id=message_id, emoji=emoji)

    async def send_poll(self, chat_id: int, question: str, options: Sequence[str]) -> SentMessage:
        return await self.send_message(chat_id, f"[poll] {question}: " + " / ".join(options))

    async def send_file(
        self, chat_id: int, path: Path, *, caption: str = "", voice_note: bool = False, reply_to: int | None = None
    ) -> SentMessage:
        kind = "voice" if voice_note else "file"
        return await self.send_message(chat_id, f"[{kind} {path.name}] {caption}".strip(), reply_to=reply_to)

    async def download_media(self, chat_id: int, message_id: int, dest_dir: Path, max_bytes: int) -> Path:
        return await copy_media(self._files.get((chat_id, message_id)), dest_dir, max_bytes, failed="download failed")

    async def transcribe_audio(self, chat_id: int, message_id: int) -> str:
        raise GatewayError("Telegram's transcription is not available in the loopback transport")

    async def get_chat(self, chat_id: int) -> ChatInfo:
        chat = self._chats.get(chat_id)
        if chat is None:
            raise GatewayError(f"unknown chat {chat_id}")
        return chat

    async def get_user(self, user: int | str) -> UserInfo:
        if user in (ME.id, ME.username, f"@{ME.username}"):
            return ME
        raise GatewayError(f"unknown user {user}")

    async def list_dialogs(self, limit: int = 50) -> list[ChatInfo]:
        return list(reversed(self._chats.values()))[:limit]

    async def get_participants(self, chat_id: int, limit: int = 200) -> list[UserInfo]:
        return [ME]

    async def kick(self, chat_id: int, user_id: int) -> None:
        self._action("kick", chat_id=chat_id, user_id=user_id)

    async def ban(self, chat_id: int, user_id: int, *, unban: bool = False) -> None:
        self._action("ban", chat_id=chat_id, user_id=user_id, unban=unban)

    async def typing(self, chat_id: int, topic_id: int | None = None, action: ChatAction = "typing") -> None:
        with contextlib.suppress(Exception):
            self._action("typing", chat_id=chat_id, topic_id=topic_id, action=action)

    # ---- the chat tools: an action line each; the schedule is kept, as Telegram's servers keep it ----------

    async def poll_results(self, chat_id: int, message_id: int) -> tuple[str, list[tuple[str, int | None]], bool]:
        raise GatewayError("poll results are not available in the loopback transport")  # nobody here votes

    async def close_poll(self, chat_id: int, message_id: int) -> None:
        self._action("close_poll", chat_id=chat_id, message_id=message_id)

    async def list_scheduled(self, chat_id: int) -> list[tuple[int, float, str]]:
        waiting = self._scheduled.get(chat_id, {})
        return sorted(((mid, when, text) for mid, (when, text) in waiting.items()), key=lambda row: (row[1], row[0]))

    async def schedule_message(self, chat_id: int, text: str, when: float) -> SentMessage:
        if not text.strip():
            raise GatewayError("cannot schedule an empty message")
        message_id = next(self._scheduled_ids)
        self._scheduled.setdefault(chat_id, {})[message_id] = (when, text)
        self._action("schedule_message", chat_id=chat_id, text=text, when=when, message_id=message_id)
        return SentMessage(chat_id, message_id, text)

    async def cancel_scheduled(self, chat_id: int, message_ids: Sequence[int]) -> None:
        for message_id in message_ids:
            self._scheduled.get(chat_id, {}).pop(message_id, None)
        self._action("cancel_scheduled", chat_id=chat_id, message_ids=list(message_ids))

    async def mark_read(self, chat_id: int) -> None:
        self._action("mark_read", chat_id=chat_id)

    async def join_chat(self, link: str) -> ChatInfo:
        # A stand-in group named by the link (the same link, the same chat): there is no directory to look in.
        chat = ChatInfo(id=-(zlib.crc32(link.encode()) + 1), type="group", title=link)
        self._action("join_chat", link=link, chat_id=chat.id)
        return chat

    async def leave_chat(self, chat: int | str) -> None:
        self._action("leave_chat", chat=chat)

    async def search_telegram(self, query: str, chat_id: int | None = None, limit: int = 20) -> list[IncomingMessage]:
        self._action("search_telegram", query=query, chat_id=chat_id, limit=limit)
        return []  # the loopback's chats keep no history beyond what the daemon archived itself


def _int64(value: Any) -> int:
    """An id as Telegram has them (a signed 64-bit integer at most); anything else is a bad event."""
    number = int(value)
    if not -(2**63) <= number < 2**63:
        raise ValueError(f"id {number} is out of range")
    return number
