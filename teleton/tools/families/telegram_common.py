"""What every Telegram tool shares: the chat rules, the gateway, refusals as error results, the schema parts.

The rules that keep one chat from reaching into another (docs/privacy.md), checked in the handlers: reading
another chat needs the clearance to read its label (and is recorded in the taint); acting in another chat
needs an admin and goes through the outbox; in a group only an admin deletes others' messages; moderation is
admin-only and in a group only; files obey the workspace labels, and downloads land in ``downloads/<chat id>/``
(0600). A ``GatewayError`` becomes an error result the model can read.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from teleton.gateway.contract import Gateway, GatewayError
from teleton.llm.tool_loop import ToolResult
from teleton.privacy.paths import chat_dir
from teleton.storage.private_files import make_private, private_dir
from teleton.tools.families.workspace_paths import PathRefused
from teleton.tools.outbox import EgressRefused
from teleton.tools.registry import Egress, Tool, ToolContext, ToolDeps

DOWNLOAD_DIR = "downloads"
CHAT_ID = {"type": "integer", "description": "another chat's id (default: this chat)"}
MESSAGE_ID = {"type": "integer", "description": "the message's id (default: the message being answered)"}


class Refused(Exception):
    """A rule of the Telegram tools says no; the message goes to the model as an error result."""


Handler = Callable[[dict[str, Any], ToolContext], Awaitable["str | ToolResult"]]


def _guarded(fn: Handler) -> Handler:
    """Turn refusals and gateway failures into error results (the model is told, the turn goes on)."""

    @functools.wraps(fn)
    async def handler(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
        try:
            return await fn(args, ctx)
        except (Refused, PathRefused, EgressRefused) as exc:
            return ToolResult.error(str(exc))
        except GatewayError as exc:
            return ToolResult.error(f"Telegram: {exc}")

    return handler


def tool(
    name: str, description: str, schema: dict[str, Any], handler: Handler, scope: str = "always", release: Any = None
) -> Tool:
    return Tool(name, description, schema, _guarded(handler), scope, "telegram", release=release)  # type: ignore[arg-type]


def gateway(ctx: ToolContext) -> Gateway:
    return deps_gateway(ctx.deps)


def deps_gateway(deps: ToolDeps) -> Gateway:
    """The gateway, for a call and for a release the owner approved (which has no turn)."""
    if deps.gateway is None:
        raise Refused("Telegram is not connected.")
    return deps.gateway


def outbox(ctx: ToolContext) -> Egress:
    """The egress rule's door: every way out of the turn's own chat goes through it."""
    if ctx.deps.outbox is None:
        raise Refused("Sending to other chats is not available here.")
    return ctx.deps.outbox


def readable_chat(args: dict[str, Any], ctx: ToolContext) -> int:
    """The chat a read is about, if this turn may read it; what is read from it enters the taint."""
    chat_id = int(args.get("chat_id", ctx.chat.id))
    label = ctx.deps.principals.chat_label(chat_id)
    if chat_id != ctx.chat.id and not ctx.clearance.may_read(label):
        raise Refused("Other chats cannot be read from this chat.")
    ctx.shown(label)
    return chat_id


def writable_chat(args: dict[str, Any], ctx: ToolContext, key: str = "chat_id") -> int:
    chat_id = int(args.get(key, ctx.chat.id))
    if chat_id != ctx.chat.id and not ctx.is_admin:
        raise Refused("Only an admin can make me act in another chat.")
    return chat_id


def target_message(args: dict[str, Any], ctx: ToolContext) -> int:
    message_id = args.get("message_id", ctx.message_id)
    if message_id is None:
        raise Refused("Which message? Give message_id.")
    return int(message_id)


async def download_to_chat(gw: Gateway, workspace: Path, chat_id: int, message_id: int, max_bytes: int) -> Path:
    """A message's media saved in ``downloads/<chat id>/`` — that chat's label, so a group's file stays
    readable by the group only — as 0600; the path returned is inside that folder (resolved)."""
    folder = chat_dir(DOWNLOAD_DIR, chat_id).as_posix()
    dest = workspace / folder
    await asyncio.to_thread(private_dir, dest, stop_at=workspace)
    path = await gw.download_media(chat_id, message_id, dest, max_bytes)
    shown = await asyncio.to_thread(relative, path, workspace)
    if not shown.startswith(folder + os.sep):  # a crafted file name must not land elsewhere
        raise Refused(f"the download was written outside {folder}/ ({shown}); refusing to use it")
    await asyncio.to_thread(make_private, path)
    return Path(path)


def relative(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace, both resolved (links followed)."""
    return os.path.relpath(os.path.realpath(path), os.path.realpath(workspace))
