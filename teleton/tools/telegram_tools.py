"""Telegram tools: thin wrappers over the Gateway contract and the feed archive (never Telethon).

Rules that keep one chat from reaching into another (DESIGN §8), checked in the handlers:
- reading another chat (history, search, info, participants, forwarding from it) needs the turn's clearance
  to read that chat's label, and what is read is recorded in the turn's exposure;
- acting in another chat (sending, forwarding to it) needs an admin AND goes through the outbox, which holds
  the send for the owner's approval when the target may not see what the turn has seen;
- in a group, only an admin may delete messages that are not the agent's own;
- moderation (kick, ban, unban) is admin-only by scope AND only in a group, checked in the handler
  (a tool has one scope; the second condition lives here and is tested on its own);
- files sent from the workspace obey the workspace labels, so MEMORY.md cannot be posted to a group;
  downloads land in ``downloads/<chat id>/`` (that chat's label), 0600.
Gateway failures (``GatewayError``) become error results the model can read.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from teleton.gateway.contract import ChatInfo, Gateway, GatewayError, UserInfo
from teleton.llm.tool_loop import ToolResult
from teleton.memory.feed_archive import is_our_message
from teleton.memory.feed_search import search_feed
from teleton.memory.hybrid_search import SearchParams
from teleton.privacy import chat_dir
from teleton.storage.private_files import make_private, private_dir
from teleton.tools.outbox import EgressRefused, Outgoing
from teleton.tools.registry import Tool, ToolContext
from teleton.tools.workspace_paths import PathRefused, check_readable, resolve

DOWNLOAD_DIR = "downloads"
DOWNLOAD_CAP = 20 * 1024 * 1024
HISTORY_MAX = 100


@dataclass(frozen=True)
class TelegramToolSettings:
    download_max_bytes: int = DOWNLOAD_CAP


class Refused(Exception):
    """A rule of this module says no; the message goes to the model as an error result."""


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


def _gateway(ctx: ToolContext) -> Gateway:
    if ctx.deps.gateway is None:
        raise Refused("Telegram is not connected.")
    return ctx.deps.gateway


def _readable_chat(args: dict[str, Any], ctx: ToolContext) -> int:
    """The chat a read is about, if this turn may read it; what is read from it enters the exposure."""
    chat_id = int(args.get("chat_id", ctx.chat.id))
    label = ctx.deps.principals.chat_label(chat_id)
    if chat_id != ctx.chat.id and not ctx.clearance.may_read(label):
        raise Refused("Other chats cannot be read from this chat.")
    ctx.shown(label)
    return chat_id


def _writable_chat(args: dict[str, Any], ctx: ToolContext, key: str = "chat_id") -> int:
    chat_id = int(args.get(key, ctx.chat.id))
    if chat_id != ctx.chat.id and not ctx.is_admin:
        raise Refused("Only an admin can make me act in another chat.")
    return chat_id


def _target_message(args: dict[str, Any], ctx: ToolContext) -> int:
    message_id = args.get("message_id", ctx.message_id)
    if message_id is None:
        raise Refused("Which message? Give message_id.")
    return int(message_id)


# -- sending -------------------------------------------------------------------------------------------
async def send_message(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = _writable_chat(args, ctx)
    if chat_id != ctx.chat.id:
        return await _outbox(ctx).send(ctx.chat.id, ctx.exposure, Outgoing("message", chat_id, {"text": args["text"]}))
    sent = await _say(ctx, args["text"])
    return f"Sent message {sent.message_id} to chat {chat_id}."


async def _say(ctx: ToolContext, text: str, reply_to: int | None = None) -> Any:
    """A send to the turn's own chat: through the runtime (its delivery record) when there is one."""
    if ctx.say is not None:
        try:
            return await ctx.say(text, reply_to)
        except Exception as exc:  # DeliveryFailed: the model is told, like any gateway failure
            raise GatewayError(str(exc)) from exc
    return await _gateway(ctx).send_message(ctx.chat.id, text, reply_to=reply_to)


def _outbox(ctx: ToolContext) -> Any:
    if ctx.deps.outbox is None:
        raise Refused("Sending to other chats is not available here.")
    return ctx.deps.outbox


async def reply(args: dict[str, Any], ctx: ToolContext) -> str:
    message_id = _target_message(args, ctx)
    sent = await _say(ctx, args["text"], message_id)
    return f"Replied to message {message_id} (sent {sent.message_id})."


async def edit_message(args: dict[str, Any], ctx: ToolContext) -> str:
    message_id = int(args["message_id"])
    await _gateway(ctx).edit_message(ctx.chat.id, message_id, args["text"])
    return f"Edited message {message_id}."


async def delete_message(args: dict[str, Any], ctx: ToolContext) -> str:
    ids = [int(i) for i in args["message_ids"]]
    if ctx.chat.type != "dm" and not ctx.is_admin:

        def _ours(conn: Any) -> list[int]:
            return [i for i in ids if not is_our_message(conn, ctx.chat.id, i)]

        others = await ctx.deps.db.read(_ours)
        if others:
            raise Refused(f"Only an admin can have me delete messages that are not mine: {others}.")
    await _gateway(ctx).delete_messages(ctx.chat.id, ids)
    return f"Deleted {len(ids)} message(s)."


async def forward_message(args: dict[str, Any], ctx: ToolContext) -> str:
    from_chat = _readable_chat({"chat_id": args.get("from_chat_id", ctx.chat.id)}, ctx)
    to_chat = _writable_chat(args, ctx, "to_chat_id")
    message_id = int(args["message_id"])
    if to_chat != ctx.chat.id:
        row = await ctx.deps.db.fetchone(
            "select text from tg_messages where chat_id = ? and message_id = ?", (from_chat, message_id)
        )
        payload = {"from_chat_id": from_chat, "message_id": message_id, "text": row["text"] if row else ""}
        return await _outbox(ctx).send(ctx.chat.id, ctx.exposure, Outgoing("forward", to_chat, payload))
    sent = await _gateway(ctx).forward_message(from_chat, message_id, to_chat)
    return f"Forwarded message {message_id} to chat {to_chat} (now message {sent.message_id})."


async def pin_message(args: dict[str, Any], ctx: ToolContext) -> str:
    message_id = _target_message(args, ctx)
    unpin = bool(args.get("unpin", False))
    await _gateway(ctx).pin_message(ctx.chat.id, message_id, unpin=unpin)
    return f"{'Unpinned' if unpin else 'Pinned'} message {message_id}."


async def react(args: dict[str, Any], ctx: ToolContext) -> str:
    message_id = _target_message(args, ctx)
    await _gateway(ctx).react(ctx.chat.id, message_id, args["emoji"])
    return f"Reacted {args['emoji']} to message {message_id}."


async def send_poll(args: dict[str, Any], ctx: ToolContext) -> str:
    sent = await _gateway(ctx).send_poll(ctx.chat.id, args["question"], list(args["options"]))
    return f"Poll sent (message {sent.message_id})."


async def send_file(args: dict[str, Any], ctx: ToolContext) -> str:
    target = await asyncio.to_thread(resolve, ctx.deps.workspace, args["path"])
    check_readable(target, ctx)  # a private file never leaves a chat that may not read it
    if not await asyncio.to_thread(target.real.is_file):
        raise Refused(f"{target.name} is not a file in the workspace.")
    sent = await _gateway(ctx).send_file(ctx.chat.id, target.real, caption=args.get("caption", ""))
    return f"Sent {target.name} (message {sent.message_id})."


def _download_tool(settings: TelegramToolSettings) -> Handler:
    async def download_media(args: dict[str, Any], ctx: ToolContext) -> str:
        chat_id = _readable_chat(args, ctx)
        message_id = _target_message(args, ctx)
        # downloads/<chat id>/ carries that chat's label: a group's file stays readable by the group only.
        folder = chat_dir(DOWNLOAD_DIR, chat_id).as_posix()
        dest = ctx.deps.workspace / folder
        await asyncio.to_thread(private_dir, dest, stop_at=ctx.deps.workspace)
        path = await _gateway(ctx).download_media(chat_id, message_id, dest, settings.download_max_bytes)
        shown = await asyncio.to_thread(_relative, path, ctx.deps.workspace)
        if not shown.startswith(folder + os.sep):  # a crafted file name must not land elsewhere
            raise Refused(f"the download was written outside {folder}/ ({shown}); refusing to use it")
        await asyncio.to_thread(make_private, path)
        return f"Saved to {shown} in the workspace."

    return download_media


def _relative(path: Path, workspace: Path) -> str:
    return os.path.relpath(os.path.realpath(path), os.path.realpath(workspace))


# -- reading -------------------------------------------------------------------------------------------
def _line(row: Any) -> str:
    when = datetime.fromtimestamp(row["date"]).astimezone()
    who = "me" if row["is_outgoing"] else (row["sender_name"] or str(row["sender_id"] or "?"))
    media = f" [{row['media_kind']}]" if row["media_kind"] else ""
    reply_to = f" (reply to {row['reply_to_id']})" if row["reply_to_id"] else ""
    return f"#{row['message_id']} {when:%Y-%m-%d %H:%M} {who}{reply_to}:{media} {row['text']}"


async def get_history(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = _readable_chat(args, ctx)
    limit = int(args.get("limit", 30))
    before = args.get("before_id")

    def _read(conn: Any) -> list[Any]:
        sql = (
            "select message_id, date, sender_id, sender_name, text, is_outgoing, media_kind, reply_to_id "
            "from tg_messages where chat_id = ? and deleted = 0 and is_service = 0 "
        )
        params: list[Any] = [chat_id]
        if before is not None:
            sql += "and message_id < ? "
            params.append(int(before))
        rows = conn.execute(sql + "order by date desc, message_id desc limit ?", [*params, limit]).fetchall()
        return list(reversed(rows))

    rows = await ctx.deps.db.read(_read)
    if not rows:
        return "No archived messages for that chat."
    return "\n".join(_line(row) for row in rows)


async def search_messages(args: dict[str, Any], ctx: ToolContext) -> str:
    query = args["query"]
    if "chat_id" in args:
        scope: list[int] | None = [_readable_chat(args, ctx)]
    else:
        chats = ctx.clearance.readable_chats()
        scope = None if chats is None else list(chats)
    params = SearchParams(limit=int(args.get("limit", 10)))
    hits = await search_feed(ctx.deps.db, query, chat_ids=scope, provider=ctx.deps.embedder, params=params)
    hits = [h for h in hits if ctx.clearance.may_read(ctx.deps.principals.chat_label(h.chat_id))]
    if not hits:
        return "No matching messages."
    ctx.shown(*{ctx.deps.principals.chat_label(h.chat_id) for h in hits})
    lines = []
    for hit in hits:
        when = datetime.fromtimestamp(hit.date).astimezone()
        who = "me" if hit.is_outgoing else (hit.sender_name or str(hit.sender_id))
        lines.append(f"[chat {hit.chat_id} #{hit.message_id} {when:%Y-%m-%d %H:%M} {who}] {hit.text}")
    return "\n".join(lines)


def _chat_line(chat: ChatInfo) -> str:
    extra = f", @{chat.username}" if chat.username else ""
    members = f", {chat.member_count} members" if chat.member_count else ""
    return f"{chat.id}: {chat.title or '(no title)'} ({chat.type}{extra}{members})"


def _user_line(user: UserInfo) -> str:
    extra = f" @{user.username}" if user.username else ""
    return f"{user.id}: {user.display_name}{extra}{' [bot]' if user.is_bot else ''}"


async def get_chat_info(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = _readable_chat(args, ctx)
    return _chat_line(await _gateway(ctx).get_chat(chat_id))


async def get_user_info(args: dict[str, Any], ctx: ToolContext) -> str:
    user: int | str = args["user"]
    if isinstance(user, str) and user.lstrip("-").isdigit():
        user = int(user)
    return _user_line(await _gateway(ctx).get_user(user))


async def list_dialogs(args: dict[str, Any], ctx: ToolContext) -> str:
    if not ctx.clearance.is_owner:
        raise Refused("The list of all chats is only shown to the owner in a private chat.")
    chats = await _gateway(ctx).list_dialogs(int(args.get("limit", 50)))
    return "\n".join(_chat_line(c) for c in chats) or "No chats."


async def get_participants(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = _readable_chat(args, ctx)
    users = await _gateway(ctx).get_participants(chat_id, int(args.get("limit", 200)))
    return "\n".join(_user_line(u) for u in users) or "No members visible."


# -- moderation ----------------------------------------------------------------------------------------
def _moderation_target(args: dict[str, Any], ctx: ToolContext) -> tuple[int, int]:
    if not ctx.is_admin:
        raise Refused("Only an admin can ask me to moderate.")
    if ctx.chat.type != "group":
        raise Refused("Moderation works only inside a group; ask me there.")
    return ctx.chat.id, int(args["user_id"])


async def kick_user(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id, user_id = _moderation_target(args, ctx)
    await _gateway(ctx).kick(chat_id, user_id)
    return f"Removed user {user_id} from the group (they can rejoin)."


async def ban_user(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id, user_id = _moderation_target(args, ctx)
    await _gateway(ctx).ban(chat_id, user_id)
    return f"Banned user {user_id} from the group."


async def unban_user(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id, user_id = _moderation_target(args, ctx)
    await _gateway(ctx).ban(chat_id, user_id, unban=True)
    return f"Unbanned user {user_id}."


# -- the tool list ---------------------------------------------------------------------------------------
_CHAT_ID = {"type": "integer", "description": "another chat's id (default: this chat)"}
_MESSAGE_ID = {"type": "integer", "description": "the message's id (default: the message being answered)"}
_USER_ID = {"type": "integer", "description": "the member's user id (see get_participants)"}


def _schema(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def telegram_tools(settings: TelegramToolSettings = TelegramToolSettings()) -> list[Tool]:
    def tool(name: str, description: str, schema: dict[str, Any], handler: Handler, scope: str = "always") -> Tool:
        return Tool(name, description, schema, _guarded(handler), scope, "telegram")  # type: ignore[arg-type]

    text = {"type": "string", "minLength": 1, "maxLength": 40_000}
    return [
        tool(
            "send_message",
            "Send a new text message to this chat (or, for an admin, to another chat by chat_id): tell, "
            "message, write to someone.",
            _schema({"text": text, "chat_id": _CHAT_ID}, ("text",)),
            send_message,
        ),
        tool(
            "reply",
            "Reply to a specific message in this chat, quoting it (default: the message being answered).",
            _schema({"text": text, "message_id": _MESSAGE_ID}, ("text",)),
            reply,
        ),
        tool(
            "edit_message",
            "Edit (change, correct, fix a typo in) the text of a message you sent earlier in this chat.",
            _schema({"message_id": {"type": "integer"}, "text": text}, ("message_id", "text")),
            edit_message,
        ),
        tool(
            "delete_message",
            "Delete (remove, take down) messages in this chat by their ids.",
            _schema(
                {"message_ids": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 100}},
                ("message_ids",),
            ),
            delete_message,
        ),
        tool(
            "forward_message",
            "Forward a message to another chat or person (from this chat unless from_chat_id is given).",
            _schema(
                {
                    "message_id": {"type": "integer"},
                    "to_chat_id": {"type": "integer"},
                    "from_chat_id": {"type": "integer"},
                },
                ("message_id", "to_chat_id"),
            ),
            forward_message,
        ),
        tool(
            "pin_message",
            "Pin a message to the top of this chat, or unpin it with unpin=true.",
            _schema({"message_id": _MESSAGE_ID, "unpin": {"type": "boolean"}}),
            pin_message,
        ),
        tool(
            "react",
            "React to a message with an emoji reaction (like 👍, ❤️, 😂, 🔥) instead of writing a reply.",
            _schema(
                {"emoji": {"type": "string", "minLength": 1, "maxLength": 16}, "message_id": _MESSAGE_ID}, ("emoji",)
            ),
            react,
        ),
        tool(
            "send_poll",
            "Create a poll (vote, survey) in this chat with a question and 2-10 answer options.",
            _schema(
                {
                    "question": {"type": "string", "minLength": 1, "maxLength": 255},
                    "options": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1, "maxLength": 100},
                        "minItems": 2,
                        "maxItems": 10,
                    },
                },
                ("question", "options"),
            ),
            send_poll,
        ),
        tool(
            "send_file",
            "Send a file, photo, image or document from your workspace to this chat.",
            _schema(
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
            _schema({"message_id": _MESSAGE_ID, "chat_id": _CHAT_ID}),
            _download_tool(settings),
        ),
        tool(
            "get_history",
            "Read the recent message history of this chat from the archive: what was said earlier, scroll "
            "back, catch up on the conversation.",
            _schema(
                {
                    "chat_id": _CHAT_ID,
                    "limit": {"type": "integer", "minimum": 1, "maximum": HISTORY_MAX},
                    "before_id": {"type": "integer", "description": "only messages older than this id"},
                }
            ),
            get_history,
        ),
        tool(
            "search_messages",
            "Search past Telegram messages in the archive: what did a person say or write about something, "
            "who mentioned a topic, when was it discussed.",
            _schema(
                {
                    "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "chat_id": _CHAT_ID,
                    "limit": {"type": "integer", "minimum": 1, "maximum": 30},
                },
                ("query",),
            ),
            search_messages,
        ),
        tool(
            "get_chat_info",
            "Get information about a chat or group: its title, type, username and how many members it has.",
            _schema({"chat_id": _CHAT_ID}),
            get_chat_info,
        ),
        tool(
            "get_user_info",
            "Look up a Telegram user's profile by id or @username: name, username, whether a bot.",
            _schema({"user": {"type": ["integer", "string"], "description": "user id or @username"}}, ("user",)),
            get_user_info,
        ),
        tool(
            "list_dialogs",
            "List your Telegram chats, groups and conversations (dialogs) with their ids.",
            _schema({"limit": {"type": "integer", "minimum": 1, "maximum": 200}}),
            list_dialogs,
            "dm-only",
        ),
        tool(
            "get_participants",
            "List the members (participants) of this group with their user ids: who is in the chat.",
            _schema({"chat_id": _CHAT_ID, "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}),
            get_participants,
        ),
        tool(
            "kick_user",
            "Kick (remove) a member from this group; they may rejoin. Group moderation, admins only.",
            _schema({"user_id": _USER_ID}, ("user_id",)),
            kick_user,
            "admin-only",
        ),
        tool(
            "ban_user",
            "Ban a member (spammer, troll) from this group so they cannot return. Group moderation, admins only.",
            _schema({"user_id": _USER_ID}, ("user_id",)),
            ban_user,
            "admin-only",
        ),
        tool(
            "unban_user",
            "Unban (lift the ban of) a user in this group so they may join again. Admins only.",
            _schema({"user_id": _USER_ID}, ("user_id",)),
            unban_user,
            "admin-only",
        ),
    ]
