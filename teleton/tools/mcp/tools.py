"""An MCP server's tools as ours: named ``mcp_<server>_<tool>``, scoped, labelled and gated (docs/privacy.md).

``access`` decides who is offered them and the server's ``label`` who may call them; their words count as the
server's unless the owner approved exactly that text (``pins``); what comes back is outside content, quoted
with its origin (pictures as image blocks); every call is a way out (``outside_tool``), held in a steered turn
with its exact arguments, and a ``read_only`` server's call goes ahead when every value in it was typed by the
speaker (docs/mcp.md, "The rules a server's tools live under").
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
from teleton.tools.held import Held, Outgoing
from teleton.tools.mcp.connection import McpConnection, RemoteTool
from teleton.tools.mcp.pins import tool_digest
from teleton.tools.mcp.review import given_description, given_schema
from teleton.tools.outbox import EgressRefused, gate
from teleton.tools.registry import Scope, Tool, ToolContext, ToolDeps

NAME_CAP = 64  # the model APIs' limit on a tool's name

Lookup = Callable[[], McpConnection | None]


def tool_name(server: str, tool: str) -> str:
    """``mcp_<server>_<tool>`` in the characters model APIs accept; a long one keeps a hash to stay unique."""
    name = f"mcp_{server}_{re.sub(r'[^A-Za-z0-9_-]', '_', tool)}"
    if len(name) <= NAME_CAP:
        return name
    suffix = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: NAME_CAP - 9]}_{suffix}"


def wanted(cfg: McpServerConfig, tool: str) -> bool:
    """The config's ``tools.include`` / ``tools.exclude`` for one of the server's tool names."""
    include, exclude = cfg.tools.include, cfg.tools.exclude
    return (not include or tool in include) and tool not in exclude


def call_body(tool: str, arguments: dict[str, Any]) -> bytes:
    """Exactly what a call sends, as the owner is shown it and as it is released."""
    return json.dumps({"tool": tool, "arguments": arguments}, ensure_ascii=False, sort_keys=True, indent=1).encode()


def typed_arguments(arguments: Any, typed: str) -> bool:
    """Whether every value in ``arguments`` (strings and numbers, at any depth) is written in ``typed``, the
    speaker's own message: then a read-only call carries nothing else the turn was shown."""
    if isinstance(arguments, dict):
        return all(typed_arguments(value, typed) for value in arguments.values())
    if isinstance(arguments, list):
        return all(typed_arguments(value, typed) for value in arguments)
    if isinstance(arguments, bool) or arguments is None:
        return True
    text = " ".join(str(arguments).split()).casefold()
    return not text or text in " ".join(typed.split()).casefold()


def _scope(cfg: McpServerConfig) -> tuple[Scope, bool]:
    if cfg.access == "everyone":
        return "always", False
    if cfg.access == "admins":
        return "admin-only", False
    return "always", True  # owner_only: the owner's clearance alone, wherever it is


def mcp_tools(
    server: str,
    cfg: McpServerConfig,
    remote: list[RemoteTool],
    connection: Lookup,
    vouched: frozenset[str] = frozenset(),
) -> list[Tool]:
    """Our tools for ``remote`` (already filtered and usable) of ``server``; ``connection`` finds its live
    connection at call time (a reconnect replaces it). ``vouched``: the tools whose exact text the owner
    approved; the others' words steer any turn they are offered to."""
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

        pin = tool_digest(tool)

        async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
            if not ctx.clearance.may_read(label):
                return ToolResult.error(f"{name}'s results are the owner's; it is not available in this chat.")
            typed = cfg.read_only and typed_arguments(args, ctx.typed)
            meta = {"server": server, "pin": pin}
            out = Outgoing("outside_tool", call_body(tool.name, args), meta=meta, tool=name, typed=typed)
            _, stop = await gate(ctx, out)
            if stop is not None:  # held for the owner (what to tell the model), or refused
                return stop
            ctx.shown(label)
            ctx.saw(origin)
            return await run(tool.name, args)

        async def release(item: Held, deps: ToolDeps) -> str:
            """A call the owner approved: exactly the arguments shown, to the tool as it was when held (a
            server that changed what the tool says since gets nothing); its result is the owner's answer."""
            sent = json.loads(item.text)
            conn = connection()
            now = next((t for t in conn.tools if t.name == sent["tool"]), None) if conn is not None else None
            if now is None or tool_digest(now) != item.meta.get("pin"):
                raise EgressRefused(
                    f"{name} is not what it was when this was held (the server changed what it says, or dropped "
                    f"it; /mcp shows what waits): nothing was sent to {server}"
                )
            result = await run(str(sent["tool"]), dict(sent["arguments"]))
            return f"called {name}. {result.content}"

        return Tool(
            name=name,
            description=given_description(server, tool.description),
            input_schema=given_schema(tool.input_schema),
            handler=handler,
            scope=scope,
            category=f"mcp:{server}",
            owner_only=owner_only,
            release=release,
            steers="" if tool.name in vouched else origin,
        )

    return [one(tool) for tool in remote]
