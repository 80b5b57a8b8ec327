"""The Tools page's view of the daemon: its registry with each tool's state and scope, changes through the
same command as ``/tool``, tool RAG's pick for a test message, and the MCP servers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teleton.agent.deps import ToolSelector
from teleton.gateway.contract import ChatInfo
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.tools.config_store import ToolConfigStore, handle_tool_command
from teleton.tools.mcp.servers import McpServers
from teleton.tools.registry import ToolRegistry

KINDS = {"owner": ("dm", True, True), "dm": ("dm", False, False), "group": ("group", False, False)}


@dataclass(frozen=True)
class ToolsView:
    registry: ToolRegistry
    store: ToolConfigStore
    selector: ToolSelector | None = None
    embedder: EmbeddingProvider | None = None
    mcp: McpServers | None = None

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "name": tool.name,
                "category": tool.category,
                "scope": self.registry.scope_of(tool.name),
                "enabled": self.registry.enabled(tool.name),
                "owner_only": tool.owner_only,
                "description": tool.description[:160],
            }
            for tool in self.registry.tools()
        ]

    async def picks(self, message: str, kind: str) -> list[str]:
        """What a new session is offered for ``message`` in a chat of ``kind`` (the owner's DM, a DM, a group)."""
        chat_type, is_admin, is_owner = KINDS[kind]
        chat = ChatInfo(id=0, type=chat_type)  # type: ignore[arg-type]
        if self.selector is None:
            return [t.name for t in self.registry.available(chat, is_admin, is_owner=is_owner)]
        vector = await embed_query(self.embedder, message)
        return list(await self.selector(message, vector, chat, is_admin, is_owner, ()) or [])

    async def change(self, action: str, name: str) -> str:
        return await handle_tool_command(f"/tool {action} {name}", self.registry, self.store)
