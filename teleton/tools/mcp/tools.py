"""An MCP server's tools as ours: named ``mcp_<server>_<tool>``, scoped, labelled and gated (DESIGN §8).

- Who sees them: ``access: owner`` (the default) offers them to the owner's clearance alone (their DM,
  ``teleton chat``), ``admins`` to admins, ``everyone`` to every chat; a call from a chat that may not read
  the server's ``label`` is refused whatever its scope.
- What comes back is outside content: quoted line by line with its origin ``(outside: mcp:<server>)``, so
  the turn is tainted by it and nothing in it passes for an instruction; the turn was shown the label.
  Pictures in it are image blocks beside the text (resized as a photo is); other content is named in text.
- What goes out: a call to a server not marked ``read_only`` is a way out (kind ``outside_tool``); in a
  turn something else steered it is held for the owner with its exact arguments, and released from them.
- The description is the server's text and untrusted: prefixed with the server's name and capped.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from teleton.config.schema import McpServerConfig
from teleton.llm.tool_loop import ToolResult
from teleton.media.errors import MediaError
from teleton.media.images import image_block, prepare_image
from teleton.privacy import OWNER, PUBLIC
from teleton.privacy.quoting import outside, outside_origin, quote_lines
from teleton.text.lines import one_line
from teleton.tools.held import Held, Outgoing
from teleton.tools.mcp.connection import McpConnection, RemoteTool
from teleton.tools.outbox import gate
from teleton.tools.registry import Scope, Tool, ToolContext, ToolDeps

DESCRIPTION_CAP = 1000  # characters of a server's tool description shown to the model
NAME_CAP = 64  # the model APIs' limit on a tool's name

Lookup = Callable[[], McpConnection | None]


def tool_name(server: str, tool: str) -> str:
    """``mcp_<server>_<tool>`` in the characters model APIs accept; a long one keeps a hash to stay unique."""
    name = f"mcp_{server}_{re.sub(r'[^A-Za-z0-9_-]', '_', tool)}"
    if len(name) <= NAME_CAP:
        return name
    suffix = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: NAME_CAP - 9]}_{suffix}"


def shown_description(text: str) -> str:
    """A server's description of a tool as the model is shown it: one line, capped (it is untrusted text)."""
    return one_line(text, DESCRIPTION_CAP)


def wanted(cfg: McpServerConfig, tool: str) -> bool:
    """The config's ``tools.include`` / ``tools.exclude`` for one of the server's tool names."""
    include, exclude = cfg.tools.include, cfg.tools.exclude
    return (not include or tool in include) and tool not in exclude


def call_body(tool: str, arguments: dict[str, Any]) -> bytes:
    """Exactly what a call sends, as the owner is shown it and as it is released."""
    return json.dumps({"tool": tool, "arguments": arguments}, ensure_ascii=False, sort_keys=True, indent=1).encode()


def _scope(cfg: McpServerConfig) -> tuple[Scope, bool]:
    if cfg.access == "everyone":
        return "always", False
    if cfg.access == "admins":
        return "admin-only", False
    return "always", True  # owner_only: the owner's clearance alone, wherever it is


def mcp_tools(server: str, cfg: McpServerConfig, remote: list[RemoteTool], connection: Lookup) -> list[Tool]:
    """Our tools for ``remote`` (already filtered and approved) of ``server``; ``connection`` finds its live
    connection at call time (a reconnect replaces it)."""
    label = PUBLIC if cfg.label == "public" else OWNER
    origin = outside("mcp", server)
    scope, owner_only = _scope(cfg)

    async def run(remote_name: str, arguments: dict[str, Any]) -> ToolResult:
        conn = connection()
        if conn is None:
            return ToolResult.error(f"MCP server {server!r} is not connected")
        outcome = await conn.call(remote_name, arguments)
        text = quote_lines(outcome.text, outside_origin(origin))
        images = []
        for number, (_, data) in enumerate(outcome.images, 1):
            try:
                images.append(image_block(await asyncio.to_thread(prepare_image, data)))
            except MediaError as exc:  # a broken or unknown picture: said, and the text still comes through
                text += f"\n[image {number} left out: {exc}]"
        return ToolResult(text, is_error=outcome.is_error, images=tuple(images))

    def one(tool: RemoteTool) -> Tool:
        name = tool_name(server, tool.name)

        async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
            if not ctx.clearance.may_read(label):
                return ToolResult.error(f"{name}'s results are the owner's; it is not available in this chat.")
            if not cfg.read_only:
                out = Outgoing("outside_tool", call_body(tool.name, args), meta={"server": server}, tool=name)
                _, stop = await gate(ctx, out)
                if stop is not None:  # held for the owner (what to tell the model), or refused
                    return stop
            ctx.shown(label)
            ctx.saw(origin)
            return await run(tool.name, args)

        async def release(item: Held, deps: ToolDeps) -> str:
            """A call the owner approved: exactly the arguments shown; its result is the owner's answer."""
            sent = json.loads(item.text)
            result = await run(str(sent["tool"]), dict(sent["arguments"]))
            return f"called {name}. {result.content}"

        return Tool(
            name=name,
            description=f"[MCP server {server}] {shown_description(tool.description)}",
            input_schema=tool.input_schema or {"type": "object"},
            handler=handler,
            scope=scope,
            category=f"mcp:{server}",
            owner_only=owner_only,
            release=release,
        )

    return [one(tool) for tool in remote]
