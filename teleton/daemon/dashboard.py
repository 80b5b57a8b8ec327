"""The dashboard's view of the daemon and its start (``web.enabled``; issue 35): what the Status page shows
— `teleton status --json`'s record, its one-paragraph line, the process's RSS, the database's size, and the
usage ledger's spend and prompt-cache hit rate — and the server in the daemon's loop. ``teleton dashboard``
uses the same view from the status file and the store it opened read-only."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teleton.backup.schedule import read_record
from teleton.config.schema import Config
from teleton.daemon.status_file import DaemonStatus, describe, free_space, pid_alive, summary
from teleton.storage import usage
from teleton.storage.private_files import write_private

if TYPE_CHECKING:  # the agent loads with the daemon; `teleton dashboard` and `--help` stay light
    from teleton.agent.deps import PolicyControl, ToolSelector
    from teleton.agent.factory import AgentStack
    from teleton.gateway.contract import ChatInfo
    from teleton.memory.embeddings.provider import EmbeddingProvider
    from teleton.memory.facts.store import FactStore
    from teleton.memory.journal.daily_logs import DailyLogs
    from teleton.memory.knowledge.index import KnowledgeIndex
    from teleton.memory.recall import Reranker
    from teleton.memory.search.hybrid import SearchParams
    from teleton.privacy import Principals
    from teleton.storage.database import Database
    from teleton.tools.mcp.servers import McpServers
    from teleton.tools.outbox import Outbox
    from teleton.tools.registry import ToolRegistry

TOKEN_FILE = "dashboard.token"  # in the data dir, 0600: the login when web.token is not set


def status_view(status: DaemonStatus | None, database: Path, data_dir: Path) -> dict[str, Any]:
    """The Status page's data: the same record and words as `teleton status`, the two sizes, the last backup."""
    now = time.time()
    free = free_space(database.parent)
    view = summary(status, now, free)
    view["line"] = describe(status, now, free)[1]
    rss = rss_bytes(status.pid) if status is not None and pid_alive(status.pid) else None
    size = sum(_size(Path(f"{database}{suffix}")) for suffix in ("", "-wal", "-shm"))
    view.update(rss_bytes=rss, rss_text=_mb(rss), database_bytes=size, database_text=_mb(size))
    record = read_record(data_dir)
    view["last_backup"] = record.line() if record is not None else "none yet (teleton backup, or backup.every)"
    view["backup_failed"] = record is not None and record.error is not None
    return view


async def model_view(stack: AgentStack) -> dict[str, Any]:
    """The model's side of the Status page: the usage ledger's figures, and the failover."""
    return {**await usage_view(stack.agent.deps.db), "failover": stack.llm.failover.status() or ""}


async def usage_view(db: Database) -> dict[str, Any]:
    """Spend today and this month and today's prompt-cache hit rate, from the usage ledger: the daemon's own
    store, or the one `teleton dashboard` opened read-only (the page says which)."""
    today = usage.today()  # one instant for the day and the month: a page read at midnight adds up
    month = today[:8] + "01"
    day, this_month = await db.read(lambda conn: (usage.spent(conn, today, today), usage.spent(conn, month, today)))
    return {
        "spend_today": _spend(day),
        "spend_month": _spend(this_month),
        "cache_today": _cache(day),
        "today": day.as_dict(),
    }


def _spend(spent: usage.Spent) -> str:
    text = f"${spent.cost_usd:,.2f} · {spent.turns} turn{'' if spent.turns == 1 else 's'}"
    return text + (f" · {spent.unpriced_turns} unpriced" if spent.unpriced_turns else "")


def _cache(spent: usage.Spent) -> str:
    if not spent.all_input:
        return "no request yet"
    return (
        f"{100 * spent.hit_rate:.0f}% read from the cache · {spent.all_input:,} input tokens, "
        f"{spent.cache_write_tokens:,} written"
    )


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mb(value: int | None) -> str:
    return "unknown" if value is None else f"{value / 1e6:,.1f} MB"


def dashboard_token(config: Config) -> tuple[str, str]:
    """(the login token, where it is): ``web.token``, or the data dir's token file, made on first use."""
    if config.web.token:
        return config.web.token, f"web.token in {config.source or 'the config'}"
    path = config.storage.data_dir / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = secrets.token_urlsafe(32)
        write_private(path, token + "\n")
    return token, str(path)


async def start_dashboard(
    config: Config,
    status: Callable[[], DaemonStatus | None],
    *,
    read_only: bool = False,
    stack: AgentStack | None = None,
    db: Database | None = None,
) -> Any:
    """Serve the dashboard in this loop; the started ``WebServer``. ``stack``: the daemon's agent, whose outbox,
    store and principals the pages use; else ``db``: a store opened read-only (`teleton dashboard`); neither:
    the status alone. ``BindRefused`` / ``MissingExtra`` / ``OSError`` (the port taken) say why it cannot."""
    from teleton.providers.extras import require  # light; beside the web imports it guards

    require("web", "the dashboard (web.enabled)")
    # The web extra, checked just above: imported only when the dashboard is on.
    from teleton.web.app import Dashboard, build_app
    from teleton.web.security import Guard, check_bind
    from teleton.web.server import WebServer, listen

    web = config.web
    check_bind(web.host, web.token)  # beyond this machine only with a token the owner chose
    token, _ = await asyncio.to_thread(dashboard_token, config)
    sock = listen(web.host, web.port)
    guard = Guard.build(token, web.host, sock.getsockname()[1], web.trusted_hosts)
    parts = _parts(config, stack) if stack is not None else await _stored_parts(config, db, status) if db else {}
    dash = Dashboard(
        guard, _status_of(config, status, stack, db), read_only=read_only, owner_id=config.telegram.owner_id,
        logs=_logs_of(config, status, daemon=stack is not None or not read_only),
        token_file="" if web.token else str(config.storage.data_dir / TOKEN_FILE), **parts,
    )  # fmt: skip
    server = WebServer(build_app(dash), sock)
    server.start()
    return server


def _status_of(
    config: Config, status: Callable[[], DaemonStatus | None], stack: AgentStack | None, db: Database | None
) -> Callable[[], Awaitable[dict[str, Any]]]:
    """The Status page's view: the daemon's record while one answers, else the store's and the config's figures."""
    from teleton.web.status_view import figures, read_stored  # the web extra, as in start_dashboard

    servers = _configured_servers(config, status)

    async def view() -> dict[str, Any]:
        shown = await asyncio.to_thread(status_view, status(), config.storage.database_file, config.storage.data_dir)
        if stack is not None:
            shown.update(await model_view(stack))
        elif db is not None:  # no daemon here: the ledger as the store holds it
            shown.update(await usage_view(db))
        live = shown["running"] or stack is not None  # the daemon serving the page shows its own record
        stored = await db.read(read_stored) if db is not None and not live else None
        shown.update(figures(shown, config.agent, stored, live=live))
        shown["mcp"] = (shown["live"].get("mcp") or {}) if live else await servers()
        return shown

    return view


def _configured_servers(config: Config, status: Callable[[], DaemonStatus | None]) -> Callable[[], Awaitable[Any]]:
    """The config's MCP servers with their pins in the store, or a running daemon's record of them."""
    # deferred: the dashboard loads with the web extra
    from teleton.tools.mcp import pins
    from teleton.web.tools_view import configured_servers

    async def servers() -> dict[str, dict[str, Any]]:
        record = status()
        live = dict(record.mcp) if record is not None and describe(record)[0] else None
        pinned = await asyncio.to_thread(pins.stored, config.storage.database_file)
        return configured_servers(config.mcp, pinned, live)

    return servers


def _logs_of(config: Config, status: Callable[[], DaemonStatus | None], *, daemon: bool) -> Callable[[], Any]:
    """Where this installation's log is, asked per page: the serving daemon's own, or (`teleton dashboard`)
    ``logging.file``, `teleton chat`'s log, and a running daemon's."""
    from teleton.web.logs_view import daemon_log, running_daemon_log, stored_log, unit_of  # the web extra, as above

    configured, chat_log = config.logging.file, config.storage.data_dir / "chat.log"

    def place() -> Any:
        if daemon:
            return daemon_log(configured, unit_of(os.getpid()))
        record = status()
        running = record.pid if record is not None and describe(record)[0] else None
        return stored_log(configured, chat_log, running_daemon_log(running))

    return place


def _parts(config: Config, stack: AgentStack) -> dict[str, Any]:
    """What the pages read and act through: the daemon's own agent parts."""
    deps = stack.agent.deps
    return _pages(
        config, deps.db, deps.principals, deps.workspace, deps.outbox, stack.registry,
        facts=deps.facts, embedder=deps.embedder, search=stack.agent.tool_deps.search, policy=deps.policy,
        reranker=deps.reranker, rerank_candidates=stack.agent.tool_deps.rerank_candidates,
        daily_logs=deps.daily_logs, selector=deps.tool_selector, mcp=deps.mcp, knowledge=deps.knowledge,
        chat_history=deps.chat_history,
    )  # fmt: skip


async def _stored_parts(config: Config, db: Database, status: Callable[[], DaemonStatus | None]) -> dict[str, Any]:
    """What the pages read from the store alone (no daemon): keyword search, nothing changes; the tools as the
    config builds them with the store's overrides, chosen by the turn's own rule over the stored tool index."""
    # The tools' registry is built from the config, as the daemon builds it.
    from teleton.memory.facts.store import FactStore
    from teleton.memory.journal.daily_logs import DailyLogs
    from teleton.privacy import Principals
    from teleton.tools.config_store import ToolConfigStore
    from teleton.tools.outbox import Outbox
    from teleton.tools.suite import build_registry
    from teleton.web.tools_view import stored_source

    principals = Principals.from_telegram(config.telegram)
    workspace = config.storage.workspace_dir
    registry = build_registry(config)
    await ToolConfigStore(db).load(registry)  # as the daemon does at start: /tool's changes hold here too
    parts = _pages(
        config, db, principals, workspace, Outbox(db, None, principals), registry, facts=FactStore(db),
        daily_logs=DailyLogs(workspace / "memory"), chat_history=config.storage.chat_history_file,
        selector=_stored_selector(config, db, registry), servers=_configured_servers(config, status),
    )  # fmt: skip
    source = stored_source(config.tool_rag, config.mcp, embedding=config.embedding.provider != "none")
    parts["tools"] = dataclasses.replace(parts["tools"], source=source)
    return parts


def _stored_selector(config: Config, db: Database, registry: ToolRegistry) -> ToolSelector:
    """The turn's tool choice (``agent.factory``'s selector: ``ToolIndex.select``) over the tool index as the
    last daemon or `teleton chat` synced it into the store: nothing is written, no embedding model loaded."""
    from teleton.tools.rag import ToolIndex, ToolRagSettings  # deferred: tool RAG only for the Tools page

    index = ToolIndex(db, None, ToolRagSettings.from_config(config.tool_rag, config.mcp))

    async def select(
        query: str, vector: Any, chat: ChatInfo, is_admin: bool, is_owner: bool, offered: Collection[str]
    ) -> list[str]:
        return await index.select(registry, chat, is_admin, query, vector, is_owner=is_owner, offered=offered)

    return select


def _pages(
    config: Config, db: Database, principals: Principals, workspace: Path, outbox: Outbox | None,
    registry: ToolRegistry, *, facts: FactStore | None, daily_logs: DailyLogs | None, chat_history: Path | None,
    embedder: EmbeddingProvider | None = None, search: SearchParams | None = None, policy: PolicyControl | None = None,
    selector: ToolSelector | None = None, mcp: McpServers | None = None, knowledge: KnowledgeIndex | None = None,
    reranker: Reranker | None = None, rerank_candidates: int = 0, servers: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """The parts of ``Dashboard`` each page reads and acts through, from the store and what goes with it."""
    # The web extra, as in start_dashboard (which checked it).
    from teleton.memory.search.hybrid import DEFAULT_PARAMS
    from teleton.tools.config_store import ToolConfigStore
    from teleton.web.chats_view import ChatsView
    from teleton.web.facts_view import FactsView
    from teleton.web.memory_view import MemorySearch
    from teleton.web.tools_view import ToolsView, offered_rule

    rule = offered_rule(config.tool_rag, config.mcp)
    return {
        "outbox": outbox,
        "memory": MemorySearch(db, principals, embedder, search or DEFAULT_PARAMS, reranker, rerank_candidates),
        "chats": ChatsView(db, policy, daily_logs),
        "tools": ToolsView(registry, ToolConfigStore(db), selector, embedder, mcp, servers, rule=rule),
        # None: no fact memory, no Facts page to change it
        "facts_view": facts and FactsView(db, facts, workspace, knowledge, chat_history),
    }
