"""The Telethon implementation of the Gateway contract: its wiring and life cycle.

``TelegramGateway.from_config(config, db)`` builds the client; ``on_message(agent.handle, gate=...)`` puts the
policy gate and the per-chat lanes in front of the agent; ``start()`` connects, checks the login, installs the
handlers and catches up, then reconnects by itself with backoff; ``stop()`` finishes or cancels the turns,
flushes the archive and disconnects. The actions (send, edit, forward, …) are ``send/actions.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from telethon import TelegramClient
from telethon.tl import types

from teleton.config.schema import Config, session_file
from teleton.gateway.contract import GatewayError, IncomingHandler, IncomingMessage, SendsMessages, UserInfo
from teleton.privacy import Principals
from teleton.process.supervisor import Supervisor
from teleton.storage import Database
from teleton.telegram import convert
from teleton.telegram.command_menu import register_commands
from teleton.telegram.faults import NotLoggedIn, describe, fatal_reason
from teleton.telegram.receive.afterwards import Afterwards
from teleton.telegram.receive.archiver import ArchiveBatcher
from teleton.telegram.receive.dispatch import DebounceConfig, Dispatcher, Gate
from teleton.telegram.receive.handlers import FeedHandlers
from teleton.telegram.receive.history import catch_up_archive
from teleton.telegram.receive.pipeline import FeedPipeline
from teleton.telegram.receive.policy import PolicyConfig
from teleton.telegram.receive.ratelimit import RateLimiter
from teleton.telegram.send.actions import TelegramActions
from teleton.telegram.send.approvals import ChoiceButtons

log = structlog.get_logger(__name__)


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
    deleted_messages: str = "keep"  # telegram.deleted_messages: keep (marked) | erase (like /forget)
    stream_edits: bool = True  # telegram.stream_edits: a DM's answer shown as it is written (send/streaming.py)
    reanswer_window_s: float = 300.0  # telegram.reanswer_edit_minutes (receive/afterwards.py)
    delete_replies: str = "dm"  # telegram.delete_replies: dm | all | off

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
            deleted_messages=tg.deleted_messages,
            stream_edits=tg.stream_edits,
            reanswer_window_s=tg.reanswer_edit_minutes * 60.0,
            delete_replies=tg.delete_replies,
        )

    def gate(self) -> Gate:
        """The policy gate and rate limits these settings describe."""
        return Gate(self.policy, RateLimiter(self.rate_limit_per_chat, self.rate_limit_global))

    def dispatcher(
        self,
        handler: IncomingHandler,
        *,
        gate: Gate | None = None,
        me_id: Callable[[], int | None],
        typing: Callable[[int, int | None], Awaitable[None]] | None = None,
        immediate: Callable[[IncomingMessage], bool] | None = None,
        on_deferred: Callable[[], Awaitable[object]] | None = None,
    ) -> Dispatcher:
        """The per-chat lanes these settings describe behind ``gate`` (None: the settings' own), in front of
        ``handler``; ``on_deferred`` takes deferred turns up again."""
        return Dispatcher(
            handler=handler,
            gate=gate or self.gate(),
            debounce=self.debounce,
            me_id=me_id,
            typing=typing,
            immediate=immediate,
            on_deferred=on_deferred,
        )


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
        raise_last_call_error=True,  # a RANDOM_ID_DUPLICATE must surface as itself (telegram/send/sending.py)
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


class WiresTheAgent(SendsMessages):
    """``on_message`` of the gateways whose messages take the receive path: Telegram's and the daemon's
    loopback. Each says what shows "typing…" in a lane (``_lane_typing``) and what else listens (``_wired``)."""

    settings: GatewaySettings
    pipeline: FeedPipeline
    dispatcher: Dispatcher | None
    me: UserInfo | None

    def on_message(
        self,
        handler: IncomingHandler,
        *,
        immediate: Callable[[IncomingMessage], bool] | None = None,
        unaddressed_media: Callable[[IncomingMessage], None] | None = None,
        archived: Callable[[], None] | None = None,
        gate: Gate | None = None,
    ) -> Dispatcher:
        """Register the agent. Messages that pass ``gate`` (by default the settings' own) reach ``handler``,
        serially per chat; those ``immediate`` picks skip the debounce; media not addressed to us go to
        ``unaddressed_media``; ``archived`` is called after each commit of new or edited messages."""
        self.dispatcher = self.settings.dispatcher(
            handler,
            gate=gate,
            me_id=lambda: self.me.id if self.me else None,
            typing=self._lane_typing(),
            immediate=immediate,
            on_deferred=lambda: self.pipeline.recover(self.settings.recovery_window_s, self.me, at_start=False),
        )
        self._wired(self.dispatcher)
        self.pipeline.attach(self.dispatcher, self.send_message, unaddressed_media, archived)
        return self.dispatcher

    def _lane_typing(self) -> Callable[[int, int | None], Awaitable[None]] | None:
        return None  # nothing shows that a turn is at work

    def _wired(self, dispatcher: Dispatcher) -> None:
        """Called with the new lanes before the pipeline is attached to them."""


class TelegramGateway(TelegramActions, WiresTheAgent):
    # The receive side's parts, which the send mixins know only as Protocols (``send/ports.py``).
    pipeline: FeedPipeline
    handlers: FeedHandlers
    dispatcher: Dispatcher | None
    settings: GatewaySettings

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
        self.pipeline = FeedPipeline(db, self.batcher, deleted_messages=self.settings.deleted_messages)
        self.handlers = FeedHandlers(self.pipeline, lambda: self.me)
        self.dispatcher: Dispatcher | None = None
        self._installed = False
        self._recovered = False
        self._menu_set = False
        self._runner: asyncio.Task[None] | None = None
        self._supervisor: Supervisor | None = None
        self._catchup: asyncio.Task[int] | None = None
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
        # Telethon would otherwise sleep through FloodWaits silently and without a bound.
        client.flood_sleep_threshold = 0

    @classmethod
    def from_config(cls, config: Config, db: Database, principals: Principals | None = None) -> TelegramGateway:
        return cls(make_client(config.telegram), db, GatewaySettings.from_telegram(config.telegram, principals))

    # ---- wiring -------------------------------------------------------------------------------------

    def _lane_typing(self) -> Callable[[int, int | None], Awaitable[None]] | None:
        return self.typing if self.settings.typing_indicator else None

    def _wired(self, dispatcher: Dispatcher) -> None:
        """Edits and deletions of answered messages reach the lanes (``receive/afterwards.py``)."""
        self.handlers.afterwards = Afterwards(
            self.db, dispatcher, self.delete_messages, self.settings.reanswer_window_s, self.settings.delete_replies
        )

    def install(self) -> None:
        """Register the update handlers on the client (idempotent)."""
        if not self._installed:
            self.handlers.install(self.client)
            ChoiceButtons(self._offer).install(self.client)
            self._installed = True
        self.batcher.start()

    def set_me(self, user: types.User) -> None:
        self.me = convert.user_record(user)
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
            # Telethon's update loop ends the connection itself when Telegram logged us out: its error
            # (a revoked session) is fatal, anything else is retried with backoff.
            error = getattr(self.client, "_updates_error", None)
            if error is not None:
                raise error

        def fatal(exc: BaseException) -> str | None:
            reason = fatal_reason(exc)
            if reason is not None:
                failure.append(reason)
                first_attempt.set()
            return reason

        self._runner = supervisor.run("telegram", connection, classify=fatal, describe=describe)
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
        if me is None:  # Telethon's get_me answers an UnauthorizedError (revoked, logged out) with None
            raise NotLoggedIn("Telegram no longer accepts this session (revoked or logged out)")
        if not isinstance(me, types.User):
            raise GatewayError("could not read our own Telegram account")
        self.set_me(me)
        if me.bot and not self._menu_set:  # once per start: the commands it answers, in Telegram's "/" menu
            self._menu_set = True
            await register_commands(self.client, self.settings.policy.principals)
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
