"""Telegram tools that act: send, reply, edit, delete, forward, pin, react, poll, send a file, download.

Thin wrappers over the Gateway contract (never Telethon); the chat rules they obey are in ``telegram_common``,
the reading tools in ``telegram_reads``. A send to another chat goes through the outbox (docs/privacy.md).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from teleton.gateway.contract import GatewayError
from teleton.memory.feed import reads
from teleton.memory.feed.archive import senders_of
from teleton.tools.families.channels import channel_tools
from teleton.tools.families.telegram_common import (
    CHAT_ID,
    MESSAGE_ID,
    Handler,
    Refused,
    deps_gateway,
    download_to_chat,
    gateway,
    outbox,
    readable_chat,
    relative,
    target_message,
    tool,
    writable_chat,
)
from teleton.tools.families.telegram_reads import read_tools
from teleton.tools.families.workspace_paths import check_readable, resolve
from teleton.tools.held import Held, Outgoing, sha256
from teleton.tools.registry import Tool, ToolContext, ToolDeps, schema

DOWNLOAD_CAP = 20 * 1024 * 1024


@dataclass(frozen=True)
class TelegramToolSettings:
    download_max_bytes: int = DOWNLOAD_CAP


# -- sending -------------------------------------------------------------------------------------------
async def send_message(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = writable_chat(args, ctx)
    if chat_id != ctx.chat.id:
        out = Outgoing("message", args["text"].encode(), to_chat_id=chat_id, tool="send_message")
        return await outbox(ctx).send(ctx, out)
    sent = await _say(ctx, args["text"])
    return f"Sent message {sent.message_id} to chat {chat_id}."


async def release_message(item: Held, deps: ToolDeps) -> str:
    sent = await deps_gateway(deps).send_message(int(item.to_chat_id or 0), item.text)
    return f"Sent to chat {item.to_chat_id} (message {sent.message_id})."


async def _say(ctx: ToolContext, text: str, reply_to: int | None = None) -> Any:
    """A send to the turn's own chat: through the runtime (its delivery record) when there is one."""
    if ctx.say is not None:
        try:
            return await ctx.say(text, reply_to)
        except Exception as exc:  # DeliveryFailed: the model is told, like any gateway failure
            raise GatewayError(str(exc)) from exc
    return await gateway(ctx).send_message(ctx.chat.id, text, reply_to=reply_to)


async def reply(args: dict[str, Any], ctx: ToolContext) -> str:
    message_id = target_message(args, ctx)
    sent = await _say(ctx, args["text"], message_id)
    return f"Replied to message {message_id} (sent {sent.message_id})."


async def edit_message(args: dict[str, Any], ctx: ToolContext) -> str:
    message_id = int(args["message_id"])
    await gateway(ctx).edit_message(ctx.chat.id, message_id, args["text"])
    return f"Edited message {message_id}."


async def delete_message(args: dict[str, Any], ctx: ToolContext) -> str:
    ids = [int(i) for i in args["message_ids"]]
    held = await ctx.deps.db.read(lambda conn: senders_of(conn, ctx.chat.id, ids))
    # Only messages of this chat: in a DM or a small group, Telegram takes ids account-wide, so an id not
    # seen here could be a message of the owner's own DM.
    unknown = [i for i in ids if i not in held]
    if unknown:
        raise Refused(f"Messages {unknown} are not messages of this chat that I have seen; nothing was deleted.")
    others = [i for i in ids if not held[i]]
    if others and ctx.chat.type != "dm" and not ctx.is_admin:
        raise Refused(f"Only an admin can have me delete messages that are not mine: {others}.")
    await gateway(ctx).delete_messages(ctx.chat.id, ids)
    return f"Deleted {len(ids)} message(s)."


async def forward_message(args: dict[str, Any], ctx: ToolContext) -> str:
    from_chat = readable_chat({"chat_id": args.get("from_chat_id", ctx.chat.id)}, ctx)
    to_chat = writable_chat(args, ctx, "to_chat_id")
    message_id = int(args["message_id"])
    if to_chat == ctx.chat.id:
        sent = await gateway(ctx).forward_message(from_chat, message_id, to_chat)
        return f"Forwarded message {message_id} to chat {to_chat} (now message {sent.message_id})."
    source = await ctx.deps.db.read(lambda conn: forwarded(conn, from_chat, message_id))
    text, shown, media = source or ("", None, None)
    meta = {"from_chat_id": from_chat, "message_id": message_id, "media": media}
    if source is None and outbox(ctx).decision(ctx, Outgoing("forward", b"", to_chat_id=to_chat)).verdict != "allow":
        raise Refused(f"Message {message_id} is not in the archive, so it cannot be shown to the owner to approve.")
    out = Outgoing("forward", text.encode(), to_chat_id=to_chat, meta=meta, source_sha256=shown, tool="forward_message")
    return await outbox(ctx).send(ctx, out)


def forwarded(conn: Any, chat_id: int, message_id: int) -> tuple[str, str, str | None] | None:
    """A message as it is now: (text, a digest of what it shows, its media kind); None when it is gone."""
    row = reads.message(conn, chat_id, message_id)
    if row is None:
        return None
    shown = json.dumps([row["text"], row["media_kind"], row["edit_date"]])
    return str(row["text"]), sha256(shown.encode()), row["media_kind"]


async def release_forward(item: Held, deps: ToolDeps) -> str:
    """A forward allowed outright is Telegram's own; one the owner approved goes out as a copy of exactly
    the text that was shown, and not at all if the message changed since (a forward would carry the
    message as it is at that moment, edits included)."""
    from_chat, message_id = int(item.meta["from_chat_id"]), int(item.meta["message_id"])
    to_chat = int(item.to_chat_id or 0)
    if not item.id:
        sent = await deps_gateway(deps).forward_message(from_chat, message_id, to_chat)
        return f"Forwarded message {message_id} to chat {to_chat} (now message {sent.message_id})."
    now = await deps.db.read(lambda conn: forwarded(conn, from_chat, message_id))
    if now is None or now[1] != item.source_sha256:
        raise Refused(f"message {message_id} changed or was deleted after you were shown it; nothing was sent")
    if not item.text.strip():
        raise Refused(f"message {message_id} has no text to send (its {item.meta.get('media')} is not sent)")
    sent = await deps_gateway(deps).send_message(to_chat, item.text)
    return f"Sent a copy of message {message_id} to chat {to_chat} (message {sent.message_id})"


async def pin_message(args: dict[str, Any], ctx: ToolContext) -> str:
    message_id = target_message(args, ctx)
    unpin = bool(args.get("unpin", False))
    await gateway(ctx).pin_message(ctx.chat.id, message_id, unpin=unpin)
    return f"{'Unpinned' if unpin else 'Pinned'} message {message_id}."


async def react(args: dict[str, Any], ctx: ToolContext) -> str:
    message_id = target_message(args, ctx)
    await gateway(ctx).react(ctx.chat.id, message_id, args["emoji"])
    return f"Reacted {args['emoji']} to message {message_id}."


async def send_poll(args: dict[str, Any], ctx: ToolContext) -> str:
    sent = await gateway(ctx).send_poll(ctx.chat.id, args["question"], list(args["options"]))
    return f"Poll sent (message {sent.message_id})."


async def offer_choices(args: dict[str, Any], ctx: ToolContext) -> str:
    """A question with options: buttons on a bot account (a press comes back as the presser's message), the
    options numbered in the text on a user account (people answer by typing)."""
    options = [" ".join(str(o).split()) for o in args["options"]]
    text = str(args["text"]).strip() + "\n\n" + "\n".join(f"{i}. {o}" for i, o in enumerate(options, 1))
    sent = await gateway(ctx).send_choice(ctx.chat.id, text, [(o, o) for o in options])
    return f"Offered {len(options)} choices (message {sent.message_id}); the answer comes back as a message."


async def send_file(args: dict[str, Any], ctx: ToolContext) -> str:
    target = await asyncio.to_thread(resolve, ctx.deps.workspace, args["path"])
    check_readable(target, ctx)  # a private file never leaves a chat that may not read it
    if not await asyncio.to_thread(target.real.is_file):
        raise Refused(f"{target.name} is not a file in the workspace.")
    sent = await gateway(ctx).send_file(ctx.chat.id, target.real, caption=args.get("caption", ""))
    return f"Sent {target.name} (message {sent.message_id})."


def _download_tool(settings: TelegramToolSettings) -> Handler:
    async def download_media(args: dict[str, Any], ctx: ToolContext) -> str:
        chat_id = readable_chat(args, ctx)
        message_id = target_message(args, ctx)
        workspace = ctx.deps.workspace
        path = await download_to_chat(gateway(ctx), workspace, chat_id, message_id, settings.download_max_bytes)
        return f"Saved to {await asyncio.to_thread(relative, path, workspace)} in the workspace."

    return download_media


# -- the tool list ---------------------------------------------------------------------------------------
# The tools that put a message in the turn's own chat: when one did, the turn's final text is not sent again.
SPEAKS_IN_CHAT = frozenset({"send_message", "reply"})


def _options(max_chars: int, max_items: int) -> dict[str, Any]:
    """The schema of a list of choices to pick from (buttons, a poll's answers): 2 to ``max_items`` short texts."""
    return {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": max_chars},
        "minItems": 2,
        "maxItems": max_items,
    }


def telegram_tools(settings: TelegramToolSettings = TelegramToolSettings()) -> list[Tool]:
    text = {"type": "string", "minLength": 1, "maxLength": 40_000}
    return [
        tool(
            "send_message",
            "Send a new text message to this chat (or, for an admin, to another chat by chat_id): tell, "
            "message, write to someone.",
            schema({"text": text, "chat_id": CHAT_ID}, ("text",)),
            send_message,
            release=release_message,
        ),
        tool(
            "reply",
            "Reply to a specific message in this chat, quoting it (default: the message being answered).",
            schema({"text": text, "message_id": MESSAGE_ID}, ("text",)),
            reply,
        ),
        tool(
            "edit_message",
            "Edit (change, correct, fix a typo in) the text of a message you sent earlier in this chat.",
            schema({"message_id": {"type": "integer"}, "text": text}, ("message_id", "text")),
            edit_message,
        ),
        tool(
            "delete_message",
            "Delete (remove, take down) messages in this chat by their ids.",
            schema(
                {"message_ids": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 100}},
                ("message_ids",),
            ),
            delete_message,
        ),
        tool(
            "forward_message",
            "Forward a message to another chat or person (from this chat unless from_chat_id is given).",
            schema(
                {
                    "message_id": {"type": "integer"},
                    "to_chat_id": {"type": "integer"},
                    "from_chat_id": {"type": "integer"},
                },
                ("message_id", "to_chat_id"),
            ),
            forward_message,
            release=release_forward,
        ),
        tool(
            "pin_message",
            "Pin a message to the top of this chat, or unpin it with unpin=true.",
            schema({"message_id": MESSAGE_ID, "unpin": {"type": "boolean"}}),
            pin_message,
        ),
        tool(
            "react",
            "React to a message with an emoji reaction (like 👍, ❤️, 😂, 🔥) instead of writing a reply.",
            schema(
                {"emoji": {"type": "string", "minLength": 1, "maxLength": 16}, "message_id": MESSAGE_ID}, ("emoji",)
            ),
            react,
        ),
        tool(
            "offer_choices",
            "Ask a question with a few options to pick from (buttons on a bot): confirm, choose, yes or no. "
            "What the person picks comes back as their message.",
            schema(
                {
                    "text": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "options": _options(64, 8),
                },
                ("text", "options"),
            ),
            offer_choices,
        ),
        tool(
            "send_poll",
            "Create a poll (vote, survey) in this chat with a question and 2-10 answer options.",
            schema(
                {
                    "question": {"type": "string", "minLength": 1, "maxLength": 255},
                    "options": _options(100, 10),
                },
                ("question", "options"),
            ),
            send_poll,
        ),
        tool(
            "send_file",
            "Send a file, photo, image or document from your workspace to this chat.",
            schema(
                {
                    "path": {"type": "string", "minLength": 1, "description": "path in the workspace"},
                    "caption": {"type": "string", "maxLength": 1024},
                },
                ("path",),
            ),
            send_file,
        ),
        tool(
            "download_media",
            "Download the photo, video, voice note or document attached to a message into the workspace "
            "downloads folder, to save or open it.",
            schema({"message_id": MESSAGE_ID, "chat_id": CHAT_ID}),
            _download_tool(settings),
        ),
        *read_tools(),
        *channel_tools(),
    ]
