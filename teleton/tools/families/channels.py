"""The owner's channels: posting and editing posts where the account may (issue 36).

Channels the account reads are archived like any chat, at the channel's own label, so only the owner's turns
search them (which channels the owner follows is the owner's business too, so a public channel is not made
``public``). The owner can have the agent post to a channel or edit a post there: a channel is another chat,
so both go through the egress rule and wait for the owner's approval of exactly these words
(``tools/outbox.py``); Telegram itself refuses them where the account is not an admin. Scheduling a post is
``schedule_message`` (Telegram's own scheduled messages). Owner-only: a group, or another person's DM, never
gets these tools, even with an admin in it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from teleton.memory.feed import reads
from teleton.tools.families.telegram_common import Refused, deps_gateway, outbox, tool
from teleton.tools.held import Held, Outgoing
from teleton.tools.registry import Tool, ToolContext, ToolDeps, schema

CHANNEL = {"type": "integer", "description": "the channel's chat id (-100…), as list_dialogs shows it"}
TEXT = {"type": "string", "minLength": 1, "maxLength": 4096}


async def _channel(ctx: ToolContext, chat_id: int) -> int:
    """A chat the archive knows as a channel (a post to a group or a person is send_message's)."""
    row = await ctx.deps.db.read(lambda conn: reads.chat(conn, chat_id))
    if row is None or row["type"] != "channel":
        raise Refused(f"Chat {chat_id} is not a channel I know; list_dialogs shows the channels.")
    return chat_id


async def post_to_channel(args: dict[str, Any], ctx: ToolContext) -> str:
    channel = await _channel(ctx, int(args["chat_id"]))
    out = Outgoing("message", str(args["text"]).encode(), to_chat_id=channel, tool="post_to_channel")
    return await outbox(ctx).send(ctx, out)


async def release_post(item: Held, deps: ToolDeps) -> str:
    sent = await deps_gateway(deps).send_message(int(item.to_chat_id or 0), item.text)
    return f"Posted to channel {item.to_chat_id} (message {sent.message_id})."


async def edit_channel_post(args: dict[str, Any], ctx: ToolContext) -> str:
    channel = await _channel(ctx, int(args["chat_id"]))
    message_id = int(args["message_id"])
    out = Outgoing("edit", str(args["text"]).encode(), to_chat_id=channel, meta={"message_id": message_id},
                   tool="edit_channel_post")  # fmt: skip
    return await outbox(ctx).send(ctx, out)


async def release_edit(item: Held, deps: ToolDeps) -> str:
    message_id = int(item.meta["message_id"])
    await deps_gateway(deps).edit_message(int(item.to_chat_id or 0), message_id, item.text)
    return f"Edited post {message_id} in channel {item.to_chat_id}."


def channel_tools() -> list[Tool]:
    owner_only = [
        tool(
            "post_to_channel",
            "Post a message to one of the owner's channels (publish, announce). The owner approves the exact "
            "words before they go out.",
            schema({"chat_id": CHANNEL, "text": TEXT}, ("chat_id", "text")),
            post_to_channel,
            "dm-only",
            release=release_post,
        ),
        tool(
            "edit_channel_post",
            "Change the text of a post in one of the owner's channels (fix, update a post). The owner approves "
            "the new words first.",
            schema(
                {"chat_id": CHANNEL, "message_id": {"type": "integer"}, "text": TEXT}, ("chat_id", "message_id", "text")
            ),
            edit_channel_post,
            "dm-only",
            release=release_edit,
        ),
    ]
    return [replace(t, owner_only=True) for t in owner_only]
