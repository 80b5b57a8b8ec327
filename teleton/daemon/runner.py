"""`teleton start`: everything in one asyncio loop, from start-up to a clean exit (docs/operations.md).

Start-up: lock, store (checked), embeddings, knowledge index and watcher, agent, feed embedder, outside
servers, Telegram, scheduler, ready. Every loop runs under one supervisor (retried with backoff; a fatal
error stops the daemon with one line, exit 78). Each part's stop is registered on ``life`` as it starts, so
SIGTERM stops them in the reverse order: the scheduler and new messages first (running turns get
TURN_GRACE_S), the database last. SIGHUP reloads the config and the prompts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from teleton.agent.factory import AgentStack
from teleton.config import Config, ConfigError, load_config, require_llm, require_telegram
from teleton.daemon.dashboard import start_dashboard
from teleton.daemon.database_watch import DatabaseWatch, leave_marker, tell_last_loss
from teleton.daemon.health import (
    damaged_line,
    gather_status,
    mark_clean_stop,
    quick_check,
    take_clean_stop,
)
from teleton.daemon.instance_lock import InstanceLock
from teleton.daemon.loop_lag import LoopLagMonitor
from teleton.daemon.loopback_gateway import LoopbackGateway
from teleton.daemon.memory_tuning import settle_after_start, tune_malloc
from teleton.daemon.periodic_jobs import add_periodic_jobs
from teleton.daemon.services import open_agent, open_store, start_feed_embedder, start_outside_servers
from teleton.daemon.status_file import DaemonStatus, write_status
from teleton.daemon.systemd_notify import Notifier
from teleton.memory.embeddings import create_provider
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.feed.embedding import FeedEmbedder, load_index
from teleton.memory.feed.search import prepare_search
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.knowledge.watch import KnowledgeWatcher
from teleton.privacy import Principals
from teleton.process.lifecycle import Lifecycle
from teleton.process.logging import configure_from
from teleton.process.supervisor import Supervisor
from teleton.scheduler.scheduler import Scheduler
from teleton.storage import Database, in_use
from teleton.storage.private_files import private_data_dir
from teleton.storage.workspace_template import create_workspace
from teleton.telegram.gateway import GatewaySettings, TelegramGateway
from teleton.telegram.receive.dispatch import Dispatcher, Gate
from teleton.telegram.receive.policy import PolicyConfig
from teleton.telegram.receive.policy_control import GatePolicy
from teleton.tools.mcp.servers import McpServers

if TYPE_CHECKING:  # the web extra: loaded only when the dashboard is on
    from teleton.web.server import WebServer
from teleton.tools.suite import build_registry

log = structlog.get_logger(__name__)

TURN_GRACE_S = 6.0  # a running turn may finish within this on SIGTERM; the whole stop stays under 10 s
STATUS_EVERY_S = 5.0
EMBED_FLUSH_S = 1.5
WATCHDOG_GRACE_S = 600.0  # a loop down this long: the watchdog ping stops, systemd restarts the daemon
EXIT_FATAL = 78  # EX_CONFIG: a restart cannot help (systemd's RestartPreventExitStatus)


@dataclass
class Daemon:
    config: Config
    transport: str | None = None  # None = Telegram; "loopback:/path.sock" = the local test transport
    notifier: Notifier = field(default_factory=Notifier)
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    status: DaemonStatus = field(default_factory=lambda: DaemonStatus(pid=os.getpid(), started_at=time.time()))
    lag: LoopLagMonitor = field(default_factory=LoopLagMonitor)
    # Each service's stop is registered as it starts: the stop order is the start order reversed.
    life: Lifecycle = field(default_factory=lambda: Lifecycle(stop_timeout_s=TURN_GRACE_S + 1))
    principals: Principals = field(init=False)
    supervisor: Supervisor = field(init=False)
    fatal: str | None = None  # why the daemon stopped itself (a loop's fatal error)
    db_checked: bool = False  # quick_check found the database sound during this run (see health.open_checked)
    db_watch: DatabaseWatch | None = None
    # Set as start-up reaches them (gather_status and reload read them).
    db: Database | None = None
    gateway: TelegramGateway | LoopbackGateway | None = None
    stack: AgentStack | None = None
    gate: Gate | None = None
    dispatcher: Dispatcher | None = None
    scheduler: Scheduler | None = None
    watcher: KnowledgeWatcher | None = None
    feed_embedder: FeedEmbedder | None = None
    mcp: McpServers | None = None
    dashboard: WebServer | None = None

    def __post_init__(self) -> None:
        self.principals = Principals.from_telegram(self.config.telegram)
        self.supervisor = Supervisor(self._on_fatal, max_backoff_s=self.config.telegram.reconnect_max_delay_s)

    async def run(self) -> int:
        started = time.monotonic()
        config = self.config
        data_dir = await asyncio.to_thread(private_data_dir, config.storage.data_dir)  # 0700, said if narrowed
        lock = InstanceLock(data_dir / "teleton.lock")
        await asyncio.to_thread(lock.acquire)
        try:  # shared with `teleton chat`; `teleton restore` waits for both to stop
            using = await asyncio.to_thread(in_use.hold, data_dir)
        except in_use.InUse:
            await asyncio.to_thread(lock.release)
            raise
        try:
            await self._start(started)
            await self.stop_event.wait()
        except Exception:
            if self.fatal is None:
                raise
            # A fatal error during start-up (a revoked session at login): the one line says it all.
        finally:
            await self._shutdown()
            await asyncio.to_thread(in_use.release, using)
            await asyncio.to_thread(lock.release)
        return EXIT_FATAL if self.fatal else 0

    def _on_fatal(self, loop: str, reason: str) -> None:
        """A loop hit an error no retry can fix: stop, say why in one line, exit non-zero."""
        if self.fatal is None:
            self.fatal = f"{loop}: {reason}"
            self._note_error(self.fatal)
            self.status.state = "stopping"
            self.stop_event.set()

    # ---- start-up -------------------------------------------------------------------------------------

    async def _start(self, started: float) -> None:
        config = self.config
        self._install_signals()
        assert config.storage.workspace is not None and config.storage.database is not None
        await asyncio.to_thread(create_workspace, config.storage.workspace)

        provider = await asyncio.to_thread(create_provider, config.embedding)
        clean = await asyncio.to_thread(take_clean_stop, config.storage.database)
        store = await open_store(self.life, config, provider, check=not clean)
        db = self.db = store.db
        self.db_checked = not clean
        self.life.on_stop("supervisor", self.supervisor.stop)
        # The feed's vector index loads (1-2 s at 1M messages) while the rest starts; ready waits for it.
        index_loaded = self.life.spawn(load_index(db), "vector-index-load")
        self.db_watch = await DatabaseWatch.opened(db.path)
        embedder = store.embedder
        knowledge = await self._start_knowledge(db, embedder)
        if embedder is not None:
            # Facts left without a vector (a model change emptied the tables, or a stop cut a catch-up short)
            # get one in the background; knowledge, feed and tools re-embed on their own paths.
            from teleton.memory.reembed import embed_pending_facts

            self.life.spawn(embed_pending_facts(db, embedder), "reembed-facts")
        gateway = self.gateway = self._make_gateway(db)
        gate = self.gate = gateway.settings.gate()  # the agent's /policy and scheduled turns use it too
        registry = build_registry(config)
        # Built before the agent, whose task tools hand it their tasks; the agent's turns join it at start.
        scheduler = Scheduler(db, registry=registry, tell_owner=self._tell_owner)
        stack = self.stack = await open_agent(
            self.life,
            config,
            store,
            gateway,
            knowledge=knowledge,
            policy=GatePolicy(gate),
            principals=self.principals,
            rate_check=self._rate_check,
            report=self.supervisor.report,
            registry=registry,
            scheduler=scheduler,
        )
        feed = self.feed_embedder = start_feed_embedder(
            self.life, store, batch=config.embedding.batch_size, flush_s=EMBED_FLUSH_S, supervisor=self.supervisor
        )
        media = stack.agent.deps.media if self.config.media.describe_all else None
        self.dispatcher = gateway.on_message(
            stack.agent.handle,
            immediate=stack.agent.wants_immediate,
            unaddressed_media=media.read_later if media is not None else None,
            archived=feed.notify if feed is not None else None,
            gate=gate,
        )
        # In the background: tools join as they connect, and stop after the turns that may call them.
        # self.config: a SIGHUP during start-up may have replaced it.
        self.mcp = start_outside_servers(self.life, self.config, stack, db, self._tell_owner)
        self.scheduler = scheduler
        add_periodic_jobs(scheduler, stack.agent, db, lambda: self.config, self.principals, self._tell_owner)
        # New messages stop before what their turns use: running turns get TURN_GRACE_S.
        self.life.on_stop("gateway", partial(gateway.stop, TURN_GRACE_S))
        await gateway.start(self.supervisor)
        await tell_last_loss(config.storage.data_dir, self._tell_owner)  # the last run's, if it stopped on one
        # After Telegram: tasks a crash failed are told to the owner. Stopped first: they may still send.
        self.life.on_stop("scheduler", partial(scheduler.stop, 2.0))
        await scheduler.start(
            self.supervisor,
            run_agent_turn=stack.agent.scheduled.run_task,
            context_for=stack.agent.scheduled.task_context,
        )

        self.life.spawn(self._status_loop(), "status-file")
        self.life.spawn(self.notifier.watchdog_loop(self._healthy), "watchdog")
        self.life.spawn(self.lag.run(), "loop-lag")
        await index_loaded  # ready means a search finds every vector without loading them first
        await prepare_search(db)  # and the first search is as fast as the next
        settle_after_start()
        summary = (
            f"vectors={'on' if db.vectors else 'off'} model={provider.model_id if provider is not None else 'none'} "
            f"dm_policy={config.telegram.dm_policy} group_policy={config.telegram.group_policy} "
            f"tools={len(stack.registry.names)} transport={self.transport or 'telegram'}"
        )
        await self._start_dashboard()
        self.status.state = "running"
        await self._write_status()
        self.notifier.ready(summary)
        log.info(
            "teleton_ready",
            startup_s=round(time.monotonic() - started, 2),
            vectors=db.vectors,
            embedding_model=provider.model_id if provider is not None else None,
            dm_policy=config.telegram.dm_policy,
            group_policy=config.telegram.group_policy,
            tools=len(stack.registry.names),
            transport=self.transport or "telegram",
        )
        print(f"teleton ready in {time.monotonic() - started:.1f}s: {summary}", flush=True)
        if clean:  # checked now that the daemon is up: a check of every page before it would delay the start
            self.life.spawn(self._check_database(db), "database-check")

    async def _start_dashboard(self) -> None:
        """web.enabled: the dashboard in this loop; one that cannot start is said and the daemon goes on."""
        if not self.config.web.enabled:
            return
        try:
            dashboard = self.dashboard = await start_dashboard(self.config, lambda: self.status, stack=self.stack)
        except Exception as exc:  # the extra missing, the port taken: the daemon's own work goes on
            log.error("dashboard_not_started", error=str(exc))
            self._note_error(f"dashboard not started: {exc}")
            return
        self.life.on_stop("dashboard", dashboard.stop)
        log.info("dashboard_started", url=f"http://{self.config.web.host}:{self.dashboard.port}/")

    async def _check_database(self, db: Database) -> None:
        try:
            problems = await quick_check(db)
        except Exception as exc:  # a lock or an I/O error: unchecked, so the next start checks before ready
            log.warning("database_check_failed", error=repr(exc))
            return
        if problems:
            self._on_fatal("database", damaged_line(db.path, problems))
        self.db_checked = not problems

    async def _start_knowledge(self, db: Database, embedder: EmbeddingProvider | None) -> KnowledgeIndex:
        index = KnowledgeIndex.from_config(db, self.config, embedder, self.principals)
        counts = await index.reindex()
        log.info("knowledge_indexed", **counts.as_dict())
        watcher = self.watcher = KnowledgeWatcher(index, self.config.memory.watch_debounce_ms)
        self.life.on_stop("knowledge watcher", watcher.stop)
        watcher.start(self.supervisor)
        return index

    def _make_gateway(self, db: Database) -> TelegramGateway | LoopbackGateway:
        settings = GatewaySettings.from_telegram(self.config.telegram, self.principals)
        if self.transport and self.transport.startswith("loopback:"):
            return LoopbackGateway(Path(self.transport.split(":", 1)[1]), db, settings)

        return TelegramGateway.from_config(self.config, db, self.principals)

    def _rate_check(self, chat_id: int, principal_id: int | None) -> str | None:
        """Scheduled turns pass the same rate limiter as messages (admins are never limited)."""
        if self.gate is None or self.principals.is_admin(principal_id):
            return None
        return self.gate.limiter.allow(chat_id)

    # ---- running ----------------------------------------------------------------------------------------

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_stop_signal, sig)
        loop.add_signal_handler(signal.SIGHUP, lambda: self.life.spawn(self.reload(), "reload"))

    def _on_stop_signal(self, sig: int) -> None:
        if self.stop_event.is_set():
            return
        log.info("stopping", signal=signal.Signals(sig).name)
        self.status.state = "stopping"
        self.notifier.stopping()
        self.stop_event.set()

    async def reload(self) -> None:
        """SIGHUP: re-read the config (logging, policies) and the workspace prompt files."""
        try:
            fresh = await asyncio.to_thread(load_config, self.config.source)
        except Exception as exc:
            log.error("reload_failed", error=str(exc), effect="keeping the running config")
            self._note_error(f"reload failed: {exc}")
            return
        self.config = fresh
        configure_from(fresh.logging)

        # Owner and admins change in the one shared record: the policy gate, the agent, the privacy rules,
        # the outbox and the heartbeat all read it at their next message.
        self.principals.update(fresh.telegram.owner_id, fresh.telegram.admin_ids)
        if self.stack is not None:
            await self.stack.agent.refresh_owner()
        if self.gate is not None:
            self.gate.policy = PolicyConfig.from_telegram(fresh.telegram, self.principals)
        if self.mcp is not None:
            await self.mcp.reload(fresh.mcp)
        elif self.status.state == "running" and self.stack is not None and self.db is not None:
            self.mcp = start_outside_servers(self.life, fresh, self.stack, self.db, self._tell_owner)  # the first one
        log.info("reloaded", source=str(fresh.source), owner_id=fresh.telegram.owner_id)

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(STATUS_EVERY_S)
            if await self._database_lost():
                return
            with contextlib.suppress(Exception):
                await self._write_status()

    async def _database_lost(self) -> bool:
        """The database file was deleted or replaced: stop (exit 78) and leave a note for the next start."""
        lost = await self.db_watch.check() if self.db_watch is not None else None
        if lost is None:
            return False
        log.error("database_lost", path=lost.path, how=lost.how, device=lost.device, inode=lost.inode)
        await leave_marker(self.config.storage.data_dir, lost)
        self._on_fatal("storage", lost.line())
        return True

    async def _write_status(self) -> None:
        await gather_status(self)
        await asyncio.to_thread(write_status, self.config.storage.data_dir / "status.json", self.status)

    def _healthy(self) -> bool:
        """Whether the watchdog may ping: no loop has been down for longer than the grace period."""
        return not self.supervisor.down_longer_than(WATCHDOG_GRACE_S)

    async def _tell_owner(self, text: str) -> None:
        chat = self.principals.notice_chat()
        if chat is not None and self.gateway is not None:  # plain text: a link in a notice shows its address
            await self.gateway.send_choice(chat, text, [])

    def _note_error(self, text: str) -> None:
        self.status.last_error, self.status.last_error_at = text, time.time()

    # ---- shutdown ---------------------------------------------------------------------------------------

    async def _shutdown(self) -> None:
        await self.life.stop()
        db = self.db
        # The marker says: closed cleanly, and found sound during this run (a stop before the check finished
        # leaves none, so quick restarts never skip it for good).
        if db is not None and "database" not in self.life.failed and self.fatal is None and self.db_checked:
            with contextlib.suppress(OSError):  # no marker: the next start checks before it is ready
                await asyncio.to_thread(mark_clean_stop, db.path)
        self.status.state = "stopped"
        with contextlib.suppress(Exception):
            await asyncio.to_thread(write_status, self.config.storage.data_dir / "status.json", self.status)
        log.info("stopped", started=self.life.started, stopped=self.life.stopped, failed=self.life.failed)


def run_daemon(config: Config, transport: str | None = None) -> int:
    problems = []
    for required in ([require_telegram] if transport is None else []) + [require_llm]:
        try:
            required(config)
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:  # all at once: one run to learn everything the config lacks
        raise ConfigError("; ".join(problems))
    tune_malloc()
    configure_from(config.logging)
    daemon = Daemon(config, transport)
    code = asyncio.run(daemon.run())
    if daemon.fatal:
        print(f"teleton stopped: {daemon.fatal}", file=sys.stderr, flush=True)
    return code
