"""The Telethon implementation of the Gateway contract, and its life cycle.

Wiring, as the daemon does it::

    gateway = TelegramGateway.from_config(config, db)      # builds the TelegramClient from config.telegram
    gateway.on_message(agent.handle)                         # accepted messages, one turn at a time per chat
    await gateway.start()                                    # connect, check login, install handlers, catch up
    ...                                                      # runs; reconnects by itself with backoff
    await gateway.stop()                                     # finish/cancel turns, flush the archive, disconnect

Every action goes through ``_call``: FloodWait is slept and retried (bounded), and any Telegram error
becomes a ``GatewayError`` the agent can report, never an exception that takes the daemon down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import structlog
from telethon import TelegramClient, errors, functions, utils
from telethon.tl import types

from teleton.gateway.contract import ChatInfo, GatewayError, IncomingHandler, IncomingMessage, SentMessage, UserInfo
from teleton.memory.feed_archive import MessageRecord
from teleton.observability.supervisor import Supervisor
from teleton.privacy import Principals
from teleton.storage import Database
from teleton.telegram import convert
from teleton.telegram.approvals import ChoiceButtons, inline_buttons
from teleton.telegram.archiver import ArchiveBatcher
from teleton.telegram.dispatch import DebounceConfig, Dispatcher
from teleton.telegram.faults import NotLoggedIn, fatal_reason
from teleton.telegram.flood import with_flood_retry
from teleton.telegram.handlers import FeedHandlers
from teleton.telegram.markdown import Span
from teleton.telegram.pipeline import FeedPipeline
from teleton.telegram.policy import PolicyConfig
from teleton.telegram.ratelimit import RateLimiter
from teleton.telegram.split import Part, plan_reply

log = structlog.get_logger(__name__)
T = TypeVar("T")

_BIG_TEXT = 50_000  # replies longer than this are prepared on a worker thread
CHOICE_TEXT_MAX = 4000  # a message with buttons is one message: longer text goes first on its own


@dataclass(frozen=True)
class GatewaySettings:
    mode: str = "user"
    bot_token: str | None = None
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    rate_limit_per_chat: int = 20
    rate_limit_global: int = 60
    debounce: DebounceConfig = field(default_factory=DebounceConfig)
    flood_wait_max_s: float = 600
    reconnect_max_delay_s: float = 300
    typing_indicator: bool = True
    session_file: Path | None = None
    recovery_window_s: float = 1800.0

    @classmethod
    def from_telegram(cls, tg: Any, principals: Principals | None = None) -> GatewaySettings:
        """From ``config.telegram`` (teleton.config.schema.TelegramConfig)."""
        return cls(
            mode=tg.mode,
            bot_token=tg.bot_token,
            policy=PolicyConfig.from_telegram(tg, principals),
            rate_limit_per_chat=tg.rate_limit_per_chat,
            rate_limit_global=tg.rate_limit_global,
            debounce=DebounceConfig(tg.debounce_ms / 1000, tg.debounce_max_factor, tg.debounce_max_messages),
            flood_wait_max_s=tg.flood_wait_max_s,
            reconnect_max_delay_s=tg.reconnect_max_delay_s,
            typing_indicator=tg.typing_indicator,
            session_file=session_file(tg.session_path) if tg.session_path else None,
            recovery_window_s=tg.recovery_window_minutes * 60.0,
        )

    def dispatcher(
        self,
        handler: IncomingHandler,
        *,
        me_id: Callable[[], int | None],
        typing: Callable[[int], Awaitable[None]] | None = None,
    ) -> Dispatcher:
        """The policy gate and per-chat lanes these settings describe, in front of ``handler``."""
        return Dispatcher(
            handler=handler,
            policy=self.policy,
            limiter=RateLimiter(self.rate_limit_per_chat, self.rate_limit_global),
            debounce=self.debounce,
            me_id=me_id,
            typing=typing,
        )


def session_file(path: Path | str) -> Path:
    """The file Telethon's SQLite session writes for ``path`` (it appends '.session' when missing)."""
    p = Path(path).expanduser()
    return p if p.suffix == ".session" else p.with_name(p.name + ".session")


def make_client(tg: Any) -> TelegramClient:
    """A TelegramClient for ``config.telegram``. FloodWaits are ours to handle, so Telethon never hides one."""
    if tg.api_id is None or not tg.api_hash:
        raise GatewayError("telegram.api_id and telegram.api_hash are required (get them at my.telegram.org)")
    if tg.session_path is None:
        raise GatewayError("telegram.session_path is not set")
    path = session_file(tg.session_path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    client = TelegramClient(
        str(path),
        int(tg.api_id),
        str(tg.api_hash),
        flood_sleep_threshold=0,
        catch_up=True,
        auto_reconnect=True,
        connection_retries=5,
        retry_delay=1,
    )
    secure_session(path)
    return client


def secure_session(path: Path | None) -> None:
    """The session file is a login: only its owner may read it."""
    if path is None:
        return
    for candidate in (path, path.with_name(path.name + "-journal")):
        if candidate.exists():
            os.chmod(candidate, 0o600)


class TelegramGateway:
    def __init__(
        self,
        client: TelegramClient,
        db: Database,
        settings: GatewaySettings | None = None,
        *,
        batcher: ArchiveBatcher | None = None,
    ) -> None:
        self.client = client
        self.db = db
        self.settings = settings or GatewaySettings()
        self.me: UserInfo | None = None
        self.batcher = batcher or ArchiveBatcher(db)
        self.pipeline = FeedPipeline(db, self.batcher)
        self.handlers = FeedHandlers(self.pipeline, lambda: self.me)
        self.dispatcher: Dispatcher | None = None
        self._installed = False
        self._recovered = False
        self._runner: asyncio.Task[None] | None = None
        self._supervisor: Supervisor | None = None
        self._catchup: asyncio.Task[int] | None = None
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        # Telethon would otherwise sleep through FloodWaits silently and without a bound.
        client.flood_sleep_threshold = 0

    @classmethod
    def from_config(cls, config: Any, db: Database, principals: Principals | None = None) -> TelegramGateway:
        return cls(make_client(config.telegram), db, GatewaySettings.from_telegram(config.telegram, principals))

    # ---- wiring -------------------------------------------------------------------------------------

    def on_message(self, handler: IncomingHandler) -> Dispatcher:
        """Register the agent. Messages that pass the gate reach ``handler``, serially per chat."""
        self.dispatcher = self.settings.dispatcher(
            handler,
            me_id=lambda: self.me.id if self.me else None,
            typing=self.typing if self.settings.typing_indicator else None,
        )
        self.pipeline.dispatcher = self.dispatcher
        return self.dispatcher

    def install(self) -> None:
        """Register the update handlers on the client (idempotent)."""
        if not self._installed:
            self.handlers.install(self.client)
            ChoiceButtons(self._offer).install(self.client)
            self._installed = True
        self.batcher.start()

    def set_me(self, user: types.User) -> None:
        self.me = convert.user_info(convert.user_record(user))
        # Telethon needs our id to build events offline (e.g. outgoing flags of short updates).
        self.client._mb_entity_cache.set_self_user(user.id, bool(user.bot), user.access_hash)

    # ---- life cycle ---------------------------------------------------------------------------------

    async def start(self, supervisor: Supervisor | None = None) -> None:
        """Connect and log in (bot token, or the session `teleton setup` created), then stay connected under
        ``supervisor`` (the daemon's; a private one otherwise): drops and unreachable networks are retried
        with backoff, FloodWait is slept as Telegram says, a revoked session or banned account is fatal.

        Returns once connected, or after a first failed attempt (Telegram unreachable: retries go on in the
        background while the rest of the daemon runs). A fatal error on the first attempt raises.
        """
        self.install()
        first_attempt = asyncio.Event()
        failure: list[str] = []
        if supervisor is None:
            supervisor = Supervisor(lambda name, reason: failure.append(reason),
                                    max_backoff_s=self.settings.reconnect_max_delay_s)  # fmt: skip
        self._supervisor = supervisor

        async def connection(up: Callable[[], None]) -> None:
            try:
                await self.client.connect()
                await self._ensure_login()
            finally:
                first_attempt.set()
            secure_session(self.settings.session_file)
            up()
            await self.client.disconnected  # returns when the connection drops: connected again at once

        def fatal(exc: BaseException) -> str | None:
            reason = fatal_reason(exc)
            if reason is not None:
                failure.append(reason)
                first_attempt.set()
            return reason

        self._runner = supervisor.run("telegram", connection, classify=fatal)
        await first_attempt.wait()
        await asyncio.sleep(0)  # let a fatal error from that attempt reach `failure`
        if failure:
            raise GatewayError(f"Telegram login failed: {failure[0]}")
        if self.me is None:
            log.warning("telegram_unreachable", effect="retrying in the background")
        else:
            log.info("telegram_started", me=self.me.display_name, mode=self.settings.mode)

    async def _ensure_login(self) -> None:
        if not await self.client.is_user_authorized():
            if self.settings.mode == "bot" and self.settings.bot_token:
                await self.client.sign_in(bot_token=self.settings.bot_token)
            else:
                raise NotLoggedIn("this Telegram session is not logged in")
        me = await self.client.get_me()
        if not isinstance(me, types.User):
            raise GatewayError("could not read our own Telegram account")
        self.set_me(me)
        if not self._recovered and self.dispatcher is not None:  # once per start, when we can send again
            self._recovered = True
            await self.pipeline.recover(self.settings.recovery_window_s, self.me)
        try:  # Telethon's own catch-up: missed updates via getDifference
            await self.client.catch_up()
        except Exception as exc:  # the archive catch-up below and live updates still run
            log.warning("telegram_catch_up_failed", error=f"{type(exc).__name__}: {exc}")
        # Bots may not read dialogs or history; Telethon's getDifference catch-up above covers them.
        if not me.bot and (self._catchup is None or self._catchup.done()):
            self._catchup = asyncio.get_running_loop().create_task(self.catch_up_archive(), name="catch-up")

    async def catch_up_archive(self) -> int:
        """Fill archive gaps left by downtime (best effort: a failure is logged, never raised)."""
        from teleton.telegram.history import catch_up_archive

        try:
            return await catch_up_archive(
                self.client, self.db, self.handlers, flood_wait_max_s=self.settings.flood_wait_max_s
            )
        except Exception as exc:
            log.warning("catch_up_failed", error=str(exc))
            return 0

    async def stop(self, grace_s: float = 5.0) -> None:
        """Finish or cancel running turns (they may still send), disconnect, then commit what was received."""
        if self._catchup is not None:
            self._catchup.cancel()
        if self.dispatcher is not None:
            await self.dispatcher.close(grace_s)
        if self._runner is not None:  # first: a disconnect must not look like a drop to reconnect from
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner
        with contextlib.suppress(Exception):
            await self.client.disconnect()
        await self.pipeline.settle()
        await self.batcher.close()  # after the disconnect: no update can arrive behind the last commit
        secure_session(self.settings.session_file)

    # ---- actions (the Gateway protocol) -------------------------------------------------------------

    async def send_message(self, chat_id: int, text: str, *, reply_to: int | None = None) -> SentMessage:
        if len(text) > _BIG_TEXT:
            parts = await asyncio.to_thread(plan_reply, text)
        else:
            parts = plan_reply(text)
        if not parts:
            raise GatewayError("cannot send an empty message")
        peer = await self._peer(chat_id)
        first: Any = None
        for i, part in enumerate(parts):
            sent = await self._send_part(peer, part, reply_to if i == 0 else None)
            first = first or sent
            await self._archive_sent(chat_id, sent, part.text, reply_to if i == 0 else None)
        return SentMessage(chat_id=chat_id, message_id=int(first.id), text=text)

    async def send_choice(self, chat_id: int, text: str, choices: Sequence[tuple[str, str]]) -> SentMessage:
        """Buttons on a bot account (see ``approvals``); a user account cannot send them: the text alone."""
        if self.settings.mode != "bot" or len(text) > CHOICE_TEXT_MAX:
            sent = await self.send_message(chat_id, text)
            if self.settings.mode != "bot":
                return sent
            text = "Your decision:"  # the long text went above; the buttons come in a short message
        peer = await self._peer(chat_id)
        message = await self._call(
            lambda: self.client.send_message(
                peer, text, parse_mode=None, link_preview=False, buttons=inline_buttons(choices)
            ),
            "send message",
        )
        await self._archive_sent(chat_id, message, text, None)
        return SentMessage(chat_id=chat_id, message_id=int(message.id), text=text)

    def _offer(self, msg: IncomingMessage) -> Any:
        return None if self.dispatcher is None else self.dispatcher.offer(msg)

    async def _send_part(self, peer: Any, part: Part, reply_to: int | None) -> Any:
        entities = [_tl_entity(s) for s in part.spans]

        def send(formatting: list[Any]) -> Callable[[], Awaitable[Any]]:
            return lambda: self.client.send_message(
                peer,
                part.text,
                formatting_entities=formatting,
                parse_mode=None,
                reply_to=reply_to,
                link_preview=False,
            )

        if entities:
            try:
                return await self._call(send(entities), "send message")
            except GatewayError as exc:
                if not isinstance(exc.__cause__, errors.BadRequestError):
                    raise
                # Formatting must never cost the user the reply: send the same words unformatted.
                log.warning("formatting_rejected", error=str(exc))
        return await self._call(send([]), "send message")

    async def _archive_sent(self, chat_id: int, sent: Any, text: str, reply_to: int | None) -> None:
        me = self.me
        record = MessageRecord(
            chat_id=chat_id,
            message_id=int(sent.id),
            date=sent.date.timestamp() if getattr(sent, "date", None) else 0.0,
            text=text,
            sender_id=me.id if me else None,
            sender_name=me.display_name if me else "",
            is_outgoing=True,
            reply_to_id=reply_to,
        )
        try:
            await self.pipeline.message(record)
        except Exception as exc:  # the message was delivered; a failed archive write must not hide that
            log.error("archive_sent_failed", chat_id=chat_id, error=str(exc))

    async def edit_message(self, chat_id: int, message_id: int, text: str) -> None:
        part = plan_reply(text, max_parts=1)[0] if text.strip() else None
        if part is None:
            raise GatewayError("cannot edit a message to empty text")
        peer = await self._peer(chat_id)
        await self._call(
            lambda: self.client.edit_message(
                peer,
                message_id,
                part.text,
                formatting_entities=[_tl_entity(s) for s in part.spans],
                parse_mode=None,
                link_preview=False,
            ),
            "edit message",
        )

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

    async def send_file(self, chat_id: int, path: Path, *, caption: str = "") -> SentMessage:
        if not await asyncio.to_thread(Path(path).is_file):
            raise GatewayError(f"no such file: {path}")
        peer = await self._peer(chat_id)
        msg = await self._call(lambda: self.client.send_file(peer, str(path), caption=caption[:1024]), "send file")
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
        out = await self._call(lambda: self.client.download_media(msg, file=str(dest_dir)), "download media")
        if not out:
            raise GatewayError("download failed")
        return Path(out)

    async def get_chat(self, chat_id: int) -> ChatInfo:
        entity = await self._call(lambda: self.client.get_entity(chat_id), "get chat")
        peer = utils.get_peer(entity)
        return convert.chat_info(convert.chat_record(chat_id, convert.chat_type(peer, entity), entity))

    async def get_user(self, user: int | str) -> UserInfo:
        entity = await self._call(lambda: self.client.get_entity(user), "get user")
        if not isinstance(entity, types.User):
            raise GatewayError(f"{user} is not a user")
        return convert.user_info(convert.user_record(entity))

    async def list_dialogs(self, limit: int = 50) -> list[ChatInfo]:
        dialogs = await self._call(lambda: self.client.get_dialogs(limit=limit), "list dialogs")
        out = []
        for d in dialogs:
            peer = utils.get_peer(d.entity)
            out.append(convert.chat_info(convert.chat_record(int(d.id), convert.chat_type(peer, d.entity), d.entity)))
        return out

    async def get_participants(self, chat_id: int, limit: int = 200) -> list[UserInfo]:
        peer = await self._peer(chat_id)
        users = await self._call(lambda: self.client.get_participants(peer, limit=limit), "get participants")
        return [convert.user_info(convert.user_record(u)) for u in users]

    async def kick(self, chat_id: int, user_id: int) -> None:
        peer = await self._peer(chat_id)
        await self._call(lambda: self.client.kick_participant(peer, user_id), "kick")

    async def ban(self, chat_id: int, user_id: int, *, unban: bool = False) -> None:
        peer = await self._peer(chat_id)
        await self._call(
            lambda: self.client.edit_permissions(peer, user_id, view_messages=unban), "unban" if unban else "ban"
        )

    async def typing(self, chat_id: int) -> None:
        peer = await self._peer(chat_id)
        request = functions.messages.SetTypingRequest(peer=peer, action=types.SendMessageTypingAction())
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


def _tl_entity(span: Span) -> Any:
    o, n = span.offset, span.length
    if span.kind == "bold":
        return types.MessageEntityBold(o, n)
    if span.kind == "italic":
        return types.MessageEntityItalic(o, n)
    if span.kind == "strike":
        return types.MessageEntityStrike(o, n)
    if span.kind == "code":
        return types.MessageEntityCode(o, n)
    if span.kind == "pre":
        return types.MessageEntityPre(o, n, span.language or "")
    if span.kind == "link":
        return types.MessageEntityTextUrl(o, n, span.url or "")
    if span.kind == "blockquote":
        return types.MessageEntityBlockquote(o, n)
    return types.MessageEntityUnknown(o, n)
