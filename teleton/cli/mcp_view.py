"""What `teleton mcp` and `teleton doctor` show of MCP servers: what a server lists (connected once, nothing
called), the pins as stored (read-only: `list` and `test` change nothing, not even by creating the database),
each listed tool against its pin, the running daemon's view from its status file, and the server's text made
safe for a terminal.

The tool layer (``tools.mcp.servers`` and ``.tools``: the registry, the privacy gate) is imported inside the
functions that need it: every `teleton` command registers this group, and `teleton --help` stays fast."""

from __future__ import annotations

import os
import signal
import unicodedata
from dataclasses import dataclass
from typing import Any

from teleton.config import Config
from teleton.config.schema import McpServerConfig
from teleton.daemon.status_file import DaemonStatus, describe, read_status
from teleton.tools.mcp.connection import McpConnection, RemoteTool
from teleton.tools.mcp.pins import APPROVED, UNREVIEWED, Pin, tool_digest

# What a tool is, next to its pin: a tool the model may be offered is "pinned" (or "unreviewed") alone.
HELD = ("changed", "new", "pending", "unpinned")


@dataclass(frozen=True)
class Seen:
    tool: RemoteTool
    status: str  # pinned | unreviewed | pending | changed | new | unpinned | excluded | invalid | gone
    was: str | None = None  # the pinned description, when the server now says something else


async def list_remote(name: str, cfg: McpServerConfig) -> list[RemoteTool]:
    """Connect, list the tools, disconnect: nothing is called. McpError (one line) when it cannot."""
    conn = McpConnection(name, cfg)
    try:
        return await conn.start()
    finally:
        await conn.close()


def compare(name: str, cfg: McpServerConfig, remote: list[RemoteTool], pinned: dict[str, Pin]) -> list[Seen]:
    """Each tool ``remote`` lists as the daemon would take it (``pins.check``), without changing a pin."""
    # Deferred, as every import of the tool layer here (the module's docstring says why).
    from teleton.tools.mcp.servers import usable_tools
    from teleton.tools.mcp.tools import wanted

    kept = {tool.name for tool in usable_tools(name, cfg, remote)[0]}
    seen = []
    for tool in remote:
        pin = pinned.get(tool.name)
        if not wanted(cfg, tool.name):
            status = "excluded"
        elif tool.name not in kept:
            status = "invalid"
        elif not pinned:
            status = "unpinned"  # no pins at all: the first connect pins everything as waiting for the owner
        elif pin is None:
            status = "new"
        elif pin.digest != tool_digest(tool):
            status = "changed"
        else:
            status = {APPROVED: "pinned", UNREVIEWED: "unreviewed"}.get(pin.state, "pending")
        was = pin.description if status == "changed" and pin and pin.description != tool.description else None
        seen.append(Seen(tool, status, was))
    listed = {tool.name for tool in remote}
    seen += [
        Seen(RemoteTool(t, p.description, p.input_schema), "gone") for t, p in sorted(pinned.items()) if t not in listed
    ]
    return seen


def transport_of(cfg: McpServerConfig) -> dict[str, Any]:
    if cfg.command is not None:
        return {"transport": "stdio", "command": cfg.command, "args": list(cfg.args), "url": None}
    return {"transport": cfg.transport, "command": None, "args": [], "url": cfg.url}


def running_daemon(config: Config) -> DaemonStatus | None:
    """The status of the daemon running on this config's data dir: its pid alive and its status file fresh (a
    stale file's pid may belong to another program by now, which a SIGHUP would end)."""
    status = read_status(config.storage.data_dir / "status.json")
    return status if status is not None and describe(status)[0] else None


def live_servers(config: Config) -> dict[str, dict[str, Any]] | None:
    """The running daemon's view of its servers (status.json's ``mcp``), or None when no daemon runs."""
    status = running_daemon(config)
    return None if status is None else dict(status.mcp)


def reload_daemon(config: Config) -> str:
    """SIGHUP the running daemon, if one runs; the line saying when the change takes effect."""
    status = running_daemon(config)
    if status is None:
        return "no daemon runs on this config: the change takes effect when it starts"
    pid = status.pid
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        return f"could not signal the daemon (pid {pid}: {exc.strerror}): run `systemctl reload teleton`"
    return f"sent SIGHUP to the running daemon (pid {pid}): it reconnects its MCP servers now"


def server_tool(name: str, tool: str, pinned: dict[str, Pin]) -> str:
    """The server's own name for ``tool``, given as the server names it or as ``mcp_<server>_<tool>``."""
    from teleton.tools.mcp.tools import tool_name  # deferred: the tool layer (the module's docstring)

    if tool in pinned:
        return tool
    return next((t for t in pinned if tool_name(name, t) == tool), tool)


def visible(text: str) -> str:
    """``text`` with every control or invisible character written as an escape: a server's words cannot hide
    from or rewrite the terminal."""
    if not text:
        return "(no description)"
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text
    )
