"""The daemon's outside tool servers (MCP, ``mcp.servers``): started before Telegram, in the background.

Their tools join the registry as they connect; the tool index re-syncs so tool RAG can pick them, and the
outbox learns how to carry out a held call the owner approves. ``teleton status`` reads their state from
status.json (``mcp``); SIGHUP reconnects them with the new config.
"""

from __future__ import annotations

from teleton.agent.factory import AgentStack
from teleton.config.schema import Config
from teleton.storage.database import Database
from teleton.tools.mcp.servers import McpServers, Tell
from teleton.tools.registry import Tool


def start_mcp(config: Config, stack: AgentStack, db: Database, tell_owner: Tell) -> McpServers | None:
    """Start keeping every enabled server connected; None when none is configured."""
    if not any(cfg.enabled for cfg in config.mcp.servers.values()):
        return None
    outbox = stack.agent.deps.outbox

    async def changed(tools: list[Tool]) -> None:
        if outbox is not None and outbox.deps is not None:
            outbox.attach(tools, outbox.deps)
        if stack.tool_index is not None:
            await stack.tool_index.sync(stack.registry)

    servers = stack.agent.deps.mcp = McpServers(
        config.mcp, stack.registry, db, tell_owner=tell_owner, tools_changed=changed
    )
    servers.start()
    return servers
