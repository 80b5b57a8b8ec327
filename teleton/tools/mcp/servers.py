"""Every configured MCP server, kept connected in the background while the daemon runs.

Each enabled server has a keeper task: connect (``connection.McpConnection``), check its tools against the
pins (``pins.check``), register the usable ones in the tool registry, wait until the connection ends,
take its tools out again, and reconnect after a backoff (1 s doubling to 5 min). Nothing here blocks a turn:
a server that is slow to start or down only means its tools are not offered meanwhile. The owner is told
once per event that needs them: tools that wait for their approval (a server's first, a tool that changed
or appeared) with exactly what the model would be given (``review``), tools left out over the limits
(``mcp.max_tools_per_server``, ``mcp.max_tools``), a server lost, a server that cannot start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import structlog

from teleton.config.schema import McpConfig, McpServerConfig
from teleton.process.redaction import redact_text
from teleton.storage.database import Database
from teleton.text.counts import counted
from teleton.tools.mcp import pins
from teleton.tools.mcp.connection import McpConnection, McpError, RemoteTool
from teleton.tools.mcp.review import review
from teleton.tools.mcp.tools import mcp_tools, tool_name, wanted
from teleton.tools.registry import Tool, ToolRegistry

log = structlog.get_logger(__name__)

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 300.0

Tell = Callable[[str], Awaitable[None]]
Changed = Callable[[list[Tool]], Awaitable[None]]


@dataclass
class ServerState:
    state: str = "connecting"  # connecting | connected | retrying | stopped
    tools: list[str] = field(default_factory=list)  # registered (our names)
    pending: list[str] = field(default_factory=list)  # the server's tool names waiting for the owner
    error: str | None = None
    restarts: int = 0
    over_limit: int = 0  # tools left out by the limits at the last connect (the owner is told when it grows)
    told_unreviewed: bool = False  # the owner was shown this run the tools pinned before approvals bound text

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "tools": self.tools,
            "pending": self.pending,
            "error": self.error,
            "restarts": self.restarts,
            "over_limit": self.over_limit,
        }


def usable_tools(name: str, cfg: McpServerConfig, remote: list[RemoteTool]) -> tuple[list[RemoteTool], list[str]]:
    """The tools of ``remote`` the config wants and a model can take, and a line for each one refused."""
    kept: list[RemoteTool] = []
    refused: list[str] = []
    for tool in remote:
        if not wanted(cfg, tool.name):
            continue
        schema = tool.input_schema
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
            if schema.get("type", "object") != "object":
                raise jsonschema.SchemaError("the input schema is not an object")
        except jsonschema.SchemaError as exc:
            refused.append(f"{tool.name}: invalid input schema ({str(exc.message)[:120]})")
            continue
        kept.append(tool)
    return kept, refused


class McpServers:
    def __init__(
        self,
        config: McpConfig,
        registry: ToolRegistry,
        db: Database,
        *,
        tell_owner: Tell | None = None,
        tools_changed: Changed | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.db = db
        self.tell_owner = tell_owner
        self.tools_changed = tools_changed  # the tool index re-syncs; the outbox learns the releases
        self.states: dict[str, ServerState] = {}
        self._connections: dict[str, McpConnection] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._connected: dict[str, asyncio.Event] = {}

    def start(self) -> None:
        for name, cfg in self.config.servers.items():
            if cfg.enabled:
                self._start_one(name, cfg)

    def _start_one(self, name: str, cfg: McpServerConfig) -> None:
        self.states[name] = ServerState()
        self._connected[name] = asyncio.Event()
        self._tasks[name] = asyncio.create_task(self._keep(name, cfg), name=f"mcp-keeper-{name}")

    async def wait_connected(self, name: str) -> None:
        """Until ``name`` has connected once (for tests and ``teleton chat``'s first prompt)."""
        await self._connected[name].wait()

    async def stop(self) -> None:
        for name in list(self._tasks):
            await self._stop_one(name)

    async def _stop_one(self, name: str) -> None:
        task = self._tasks.pop(name)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await self._drop(name)
        self.states[name].state = "stopped"

    async def reload(self, config: McpConfig) -> None:
        """SIGHUP: servers added, removed or changed in the config start, stop or reconnect; the others keep
        their connection and have their tools checked against the pins again (``teleton mcp approve``)."""
        old, self.config = self.config.servers, config
        for name in list(self._tasks):
            new = config.servers.get(name)
            if new is None or not new.enabled or new != old.get(name):
                await self._stop_one(name)
                self.states.pop(name, None)
        for name, cfg in config.servers.items():
            if not cfg.enabled:
                continue
            if name not in self._tasks:
                self._start_one(name, cfg)
            else:
                await self._recheck(name)

    async def approve(self, name: str, code: str, tool: str | None = None) -> list[str] | None:
        """The owner approves ``name``'s waiting tools (or one) with the code of the text they were shown:
        the names approved and offered at once, or None when the code is not the code of what waits now."""
        approved = await pins.approve(self.db, name, code, tool)
        if approved:
            await self._recheck(name)
        return approved

    async def review(self, name: str, tool: str | None = None) -> str | None:
        """What waits of ``name`` (or ``tool``), shown whole with its approval code; None when nothing does."""
        waiting = await pins.waiting(self.db, name, tool)
        if not waiting:
            return None
        return review(name, waiting, why="these tools wait for your approval.", tool_name=tool_name)

    def describe(self) -> str:
        """Every server's state and what waits for the owner, for ``/mcp``."""
        if not self.states:
            return "No MCP server is configured (mcp.servers; docs/mcp.md)."
        lines = []
        for name, state in sorted(self.states.items()):
            line = f"{name}: {state.state}, {counted(len(state.tools), 'tool')}"
            if state.error:
                line += f" (last error: {state.error})"
            lines.append(line)
            if state.pending:
                lines.append(f"  waiting for /mcp approve {name}: {', '.join(state.pending)}")
        return "\n".join(lines)

    async def _recheck(self, name: str) -> None:
        conn, cfg = self._connections.get(name), self.config.servers.get(name)
        if conn is not None and cfg is not None:
            await self._register(name, cfg, conn.tools)

    def connection(self, name: str) -> McpConnection | None:
        return self._connections.get(name)

    def status(self) -> dict[str, dict[str, Any]]:
        return {name: state.as_dict() for name, state in sorted(self.states.items())}

    async def _keep(self, name: str, cfg: McpServerConfig) -> None:
        state = self.states[name]
        backoff = BACKOFF_FIRST_S
        told_failure = False
        while True:
            conn = McpConnection(name, cfg)
            try:
                remote = await conn.start()
            except McpError as exc:
                state.state, state.error = "retrying", str(exc)
                log.warning("mcp_connect_failed", server=name, error=str(exc), retry_in_s=backoff)
                if not told_failure:
                    told_failure = True
                    # An error may quote the server's URL with its key: a chat is a log the owner cannot rotate.
                    said = redact_text(str(exc))
                    await self._tell(f"MCP server {name} could not start: {said}. I keep trying in the background.")
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            told_failure = False
            backoff = BACKOFF_FIRST_S
            self._connections[name] = conn
            await self._register(name, cfg, remote)
            state.state, state.error = "connected", None
            self._connected[name].set()
            await conn.wait_closed()
            await self._drop(name)
            state.state, state.error, state.restarts = "retrying", conn.error, state.restarts + 1
            await self._tell(f"MCP server {name} went away ({redact_text(str(conn.error))}); reconnecting.")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _register(self, name: str, cfg: McpServerConfig, remote: list[RemoteTool]) -> None:
        # Within the limits first: a server listing thousands of tools costs a schema check of the kept ones only.
        listed = [tool for tool in remote if wanted(cfg, tool.name)]
        room = self._room(name)
        kept, refused = usable_tools(name, cfg, listed[:room])
        over = max(0, len(listed) - room)
        checked = await pins.check(self.db, name, kept)
        usable = [tool for tool in kept if tool.name in checked.usable]
        vouched = frozenset(tool for tool, approved in checked.usable.items() if approved)
        tools = []
        for tool in mcp_tools(name, cfg, usable, lambda: self._connections.get(name), vouched):
            other = self.registry.get(tool.name)
            if other is not None and other.category != tool.category:  # mcp_a_b_c: server a_b or a, tool b_c?
                refused.append(f"{tool.name}: the name is taken by {other.category or 'a built-in tool'}")
                continue
            self.registry.unregister(tool.name)
            self.registry.register(tool)
            tools.append(tool)
        state = self.states[name]
        state.tools = [tool.name for tool in tools]
        state.pending = sorted(tool.name for tool in kept if tool.name not in checked.usable)
        log.info("mcp_connected", server=name, tools=len(tools), pending=len(state.pending), refused=len(refused))
        if self.tools_changed is not None:
            await self.tools_changed(tools)
        lines = []
        unreviewed = [] if state.told_unreviewed else [tool.name for tool in usable if tool.name not in vouched]
        waiting = await pins.waiting(self.db, name) if checked.changed or unreviewed else []
        if checked.changed:
            why = (
                "it connected for the first time; its tools are off until you approve them."
                if checked.first
                else "these tools are new or changed what they say, and are off until you approve them."
            )
            shown = [pin for pin in waiting if pin.tool in checked.changed]
            lines.append(review(name, shown, why=why, tool_name=tool_name))
        if unreviewed:
            state.told_unreviewed = True
            why = (
                "these tools were pinned before approvals were bound to what they say. They are offered, but as "
                "the server's words: a conversation they are offered to waits for you before it fetches, runs or "
                "calls anything you did not type."
            )
            shown = [pin for pin in waiting if pin.tool in unreviewed]
            lines.append(review(name, shown, why=why, tool_name=tool_name))
        if over > state.over_limit:
            lines.append(
                f"MCP server {name} lists more tools than the limits allow (mcp.max_tools_per_server "
                f"{self.config.max_tools_per_server}, mcp.max_tools {self.config.max_tools} in all): {over} of "
                "them are left out."
            )
        state.over_limit = over
        if refused:
            lines.append(f"MCP server {name}: tools left out: " + "; ".join(refused))
        if lines:
            await self._tell("\n\n".join(lines))

    def _room(self, name: str) -> int:
        """How many of ``name``'s tools (the first it lists) the per-server and total limits leave room for: a
        server listing thousands of tools must not fill the registry or the requests."""
        others = sum(len(state.tools) for server, state in self.states.items() if server != name)
        return max(0, min(self.config.max_tools_per_server, self.config.max_tools - others))

    async def _drop(self, name: str) -> None:
        conn = self._connections.pop(name, None)
        state = self.states.get(name)
        for tool in state.tools if state else []:
            self.registry.unregister(tool)
        if state:
            state.tools = []
        if conn is not None:
            await conn.close()
        if self.tools_changed is not None:
            await self.tools_changed([])

    async def _tell(self, text: str) -> None:
        if self.tell_owner is None:
            return
        try:
            await self.tell_owner(text)
        except Exception as exc:  # a notice that cannot go out must not stop the keeper
            log.warning("mcp_notice_failed", error=repr(exc))
