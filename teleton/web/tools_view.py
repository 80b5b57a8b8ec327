"""The Tools page's view of the daemon: its registry with each tool's state and scope, changes through the
same command as ``/tool``, the tools a turn would be offered for a test message, and the MCP servers.

Without a daemon (`teleton dashboard`) the same view reads the config and the store: the registry as the
config builds it with the overrides the store holds, the turn's own tool choice over the tool index as the
store holds it, and the configured servers with their pins."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from teleton.agent.deps import ToolSelector
from teleton.config.schema import McpConfig, ToolRagConfig
from teleton.gateway.contract import ChatInfo
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.text.lines import shorten
from teleton.tools.config_store import ToolConfigStore, handle_tool_command
from teleton.tools.mcp.pins import APPROVED, PENDING, UNREVIEWED, Pin
from teleton.tools.mcp.servers import McpServers
from teleton.tools.mcp.tools import tool_name, wanted
from teleton.tools.rag import StickyPicks
from teleton.tools.registry import ToolRegistry

KINDS = {"owner": ("dm", True, True), "dm": ("dm", False, False), "group": ("group", False, False)}
DESCRIPTION_CAP = 160
NOT_CONNECTED = "not connected (no daemon running); its tools as pinned in the database"

Servers = Callable[[], Awaitable[dict[str, dict[str, Any]]]]


@dataclass(frozen=True)
class ToolsView:
    registry: ToolRegistry
    store: ToolConfigStore
    selector: ToolSelector | None = None
    embedder: EmbeddingProvider | None = None
    mcp: McpServers | None = None
    configured: Servers | None = None  # without a daemon: the config's servers and their pins in the store
    rule: str = ""  # how a turn chooses its tools (tool_rag.*), in words
    source: str = ""  # where the offered tools are counted from, when it is not the daemon

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "name": tool.name,
                "category": tool.category,
                "scope": self.registry.scope_of(tool.name),
                "enabled": self.registry.enabled(tool.name),
                "owner_only": tool.owner_only,
                "description": shorten(tool.description, DESCRIPTION_CAP),
            }
            for tool in self.registry.tools()
        ]

    async def picks(self, message: str, kind: str) -> list[str]:
        """What a new session's first turn with ``message`` in a chat of ``kind`` (the owner's DM, a DM, a group)
        is offered, chosen as the turn chooses (``agent.stages.context``): the selector's names, the session's
        list they start, then what the chat may use of them."""
        chat_type, is_admin, is_owner = KINDS[kind]
        chat = ChatInfo(id=0, type=chat_type)  # type: ignore[arg-type]
        names = None
        if self.selector is not None:
            vector = await embed_query(self.embedder, message)
            names = await self.selector(message, vector, chat, is_admin, is_owner, ())
        names = StickyPicks().offer("new session", names)
        return [tool.name for tool in self.registry.available(chat, is_admin, names, is_owner=is_owner)]

    async def servers(self) -> dict[str, dict[str, Any]]:
        if self.mcp is not None:
            return self.mcp.status()
        return await self.configured() if self.configured is not None else {}

    async def change(self, action: str, name: str) -> str:
        return await handle_tool_command(f"/tool {action} {name}", self.registry, self.store)


def offered_rule(rag: ToolRagConfig, mcp: McpConfig) -> str:
    """How a turn chooses the tools it is offered, as ``tools.rag.ToolIndex.select`` does for this config."""
    if not rag.enabled:
        return f"every tool the chat may use (tool_rag.enabled: false; outside up to mcp.max_offered {mcp.max_offered})"
    if rag.session_tools == "all":
        return (
            "every one of ours the chat may use (tool_rag.session_tools: all), and the outside (MCP) tools that rank "
            f"for the message, up to mcp.max_offered {mcp.max_offered}"
        )
    return (
        f"tool RAG's {rag.top_k} best ranked for the message, and {', '.join(rag.always_include)} "
        "(tool_rag.session_tools: picked)"
    )


def stored_source(rag: ToolRagConfig, mcp: McpConfig, *, embedding: bool) -> str:
    """Where `teleton dashboard` counts the offered tools from, and what it cannot count without a daemon."""
    said = "Chosen by the turn's own rule from the config and the database (no daemon asked)."
    if mcp.servers:
        said += (
            " Outside (MCP) tools are not counted: a turn is offered those of a server its process has connected,"
            " and this dashboard connects none."
        )
    if embedding and rag.enabled and rag.session_tools == "picked":
        said += " Ranked by keyword only here (no embedding model loaded); a turn also ranks by meaning."
    return said


def configured_servers(
    config: McpConfig, pinned: Mapping[str, Mapping[str, Pin]], live: Mapping[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Each configured server in the shape of ``McpServers.status()``: the running daemon's record of it when one
    runs (``live``), else from the config and its pins in the store (``pins.stored``), said so in its state."""
    rows = {}
    for name, cfg in sorted(config.servers.items()):
        if live is not None and name in live:
            rows[name] = dict(live[name])
            continue
        pins = {tool: pin for tool, pin in sorted(pinned.get(name, {}).items()) if wanted(cfg, tool)}
        state = NOT_CONNECTED if live is None else "not loaded by the running daemon (systemctl reload teleton)"
        rows[name] = {
            "state": state if cfg.enabled else "disabled in the config",
            "tools": [tool_name(name, tool) for tool, pin in pins.items() if pin.state in (APPROVED, UNREVIEWED)],
            "pending": [tool for tool, pin in pins.items() if pin.state == PENDING],
            "error": None,
        }
    return rows
