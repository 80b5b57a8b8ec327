"""Telegram tools that read: history and search from the archive, chat and user info, dialogs, members;
and group moderation. The chat rules they obey are in ``telegram_common``."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Any

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.memory.feed import reads
from teleton.memory.feed.search import feed_hit, other_topic
from teleton.memory.recall import Question
from teleton.privacy.quoting import forwarded
from teleton.tools.families.archive_order import archive_messages, query_vector
from teleton.tools.families.telegram_common import CHAT_ID, Refused, gateway, readable_chat, tool
from teleton.tools.registry import Tool, ToolContext, schema

HISTORY_MAX = 100
_USER_ID = {"type": "integer", "description": "the member's user id (see get_participants)"}


def _line(row: Any) -> str:
    when = datetime.fromtimestamp(row["date"]).astimezone()
    who = "me" if row["is_outgoing"] else (row["sender_name"] or str(row["sender_id"] or "?"))
    media = f" [{row['media_kind']}]" if row["media_kind"] else ""
    reply_to = f" (reply to {row['reply_to_id']})" if row["reply_to_id"] else ""
    return forwarded(
        f"#{row['message_id']} {when:%Y-%m-%d %H:%M} {who}{reply_to}:{media} {row['text']}", row["fwd_from"]
    )


async def get_history(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = readable_chat(args, ctx)
    limit = int(args.get("limit", 30))
    before = args.get("before_id")

    before_id = None if before is None else int(before)
    rows = await ctx.deps.db.read(lambda conn: reads.history(conn, chat_id, limit, before_id))
    if not rows:
        return "No archived messages for that chat."
    return "\n".join(_line(row) for row in rows)


async def search_messages(args: dict[str, Any], ctx: ToolContext) -> str:
    query = args["query"]
    chats = [readable_chat(args, ctx)] if "chat_id" in args else None
    params = replace(ctx.deps.search, limit=int(args.get("limit", 10)))
    q = Question(query, await query_vector(ctx, query), ctx.clearance)
    hits = [feed_hit(h) for h in await archive_messages(ctx, q, params, chats)]
    # In a forum topic: the topic's own messages first (or only them), then the rest of the chat, marked.
    elsewhere = {h.id: other_topic(h.chat_id, h.topic_id, ctx.chat.id, ctx.topic_id) for h in hits}
    if args.get("this_topic_only"):
        hits = [h for h in hits if h.chat_id == ctx.chat.id and not elsewhere[h.id]]
    hits.sort(key=lambda h: elsewhere[h.id])
    if not hits:
        return "No matching messages."
    ctx.shown(*{ctx.deps.principals.chat_label(h.chat_id) for h in hits})
    lines = []
    for hit in hits:
        when = datetime.fromtimestamp(hit.date).astimezone()
        who = "me" if hit.is_outgoing else (hit.sender_name or str(hit.sender_id))
        where = f" topic {hit.topic_id or 'General'}" if elsewhere[hit.id] else ""
        said = f"[chat {hit.chat_id}{where} #{hit.message_id} {when:%Y-%m-%d %H:%M} {who}] {hit.text}"
        lines.append(forwarded(said, hit.fwd_from))
    return "\n".join(lines)


def _chat_line(chat: ChatInfo) -> str:
    extra = f", @{chat.username}" if chat.username else ""
    members = f", {chat.member_count} members" if chat.member_count else ""
    return f"{chat.id}: {chat.title or '(no title)'} ({chat.type}{extra}{members})"


def _user_line(user: UserInfo) -> str:
    extra = f" @{user.username}" if user.username else ""
    return f"{user.id}: {user.display_name}{extra}{' [bot]' if user.is_bot else ''}"


async def get_chat_info(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = readable_chat(args, ctx)
    return _chat_line(await gateway(ctx).get_chat(chat_id))


async def get_user_info(args: dict[str, Any], ctx: ToolContext) -> str:
    user: int | str = args["user"]
    if isinstance(user, str) and user.lstrip("-").isdigit():
        user = int(user)
    if not ctx.clearance.is_owner:
        await _others_may_look_up(user, ctx)
    found = await gateway(ctx).get_user(user)
    ctx.shown(ctx.deps.principals.chat_label(found.id))  # a name is its person's own words
    return _user_line(found)


_USERNAME = re.compile(r"@[A-Za-z][A-Za-z0-9_]{1,31}")


async def _others_may_look_up(user: int | str, ctx: ToolContext) -> None:
    """Anyone but the owner looks people up by a public @username, or by the id of someone who wrote in this
    chat. A phone number, a name or an invite link is resolved through the owner's account (the contact
    book, the names the owner saved, the private groups it is in), so it would answer from the owner's
    address book."""
    if isinstance(user, str):
        if not _USERNAME.fullmatch(user.strip()):
            raise Refused("Here I look people up only by their public @username, or the id of someone in this chat.")
        return
    if not await ctx.deps.db.read(lambda conn: reads.has_written(conn, ctx.chat.id, user)):
        raise Refused(f"User {user} has not written in this chat; here I look up only people in it, or an @username.")


async def list_dialogs(args: dict[str, Any], ctx: ToolContext) -> str:
    if not ctx.clearance.is_owner:
        raise Refused("The list of all chats is only shown to the owner in a private chat.")
    chats = await gateway(ctx).list_dialogs(int(args.get("limit", 50)))
    ctx.shown(*(ctx.deps.principals.chat_label(c.id) for c in chats))  # titles are their chats' words
    return "\n".join(_chat_line(c) for c in chats) or "No chats."


async def get_participants(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = readable_chat(args, ctx)
    users = await gateway(ctx).get_participants(chat_id, int(args.get("limit", 200)))
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
    await gateway(ctx).kick(chat_id, user_id)
    return f"Removed user {user_id} from the group (they can rejoin)."


async def ban_user(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id, user_id = _moderation_target(args, ctx)
    await gateway(ctx).ban(chat_id, user_id)
    return f"Banned user {user_id} from the group."


async def unban_user(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id, user_id = _moderation_target(args, ctx)
    await gateway(ctx).ban(chat_id, user_id, unban=True)
    return f"Unbanned user {user_id}."


def read_tools() -> list[Tool]:
    return [
        tool(
            "get_history",
            "Read the recent message history of this chat from the archive: what was said earlier, scroll "
            "back, catch up on the conversation.",
            schema(
                {
                    "chat_id": CHAT_ID,
                    "limit": {"type": "integer", "minimum": 1, "maximum": HISTORY_MAX},
                    "before_id": {"type": "integer", "description": "only messages older than this id"},
                }
            ),
            get_history,
        ),
        tool(
            "search_messages",
            "Search past Telegram messages in the archive: what did a person say or write about something, "
            "who mentioned a topic, when was it discussed. In a forum topic, that topic's messages come first; "
            "messages of the chat's other topics are marked with theirs.",
            schema(
                {
                    "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "chat_id": CHAT_ID,
                    "limit": {"type": "integer", "minimum": 1, "maximum": 30},
                    "this_topic_only": {"type": "boolean", "description": "only this forum topic's messages"},
                },
                ("query",),
            ),
            search_messages,
        ),
        tool(
            "get_chat_info",
            "Get information about a chat or group: its title, type, username and how many members it has.",
            schema({"chat_id": CHAT_ID}),
            get_chat_info,
        ),
        tool(
            "get_user_info",
            "Look up a Telegram user's profile by id or @username: name, username, whether a bot.",
            schema({"user": {"type": ["integer", "string"], "description": "user id or @username"}}, ("user",)),
            get_user_info,
        ),
        tool(
            "list_dialogs",
            "List your Telegram chats, groups and conversations (dialogs) with their ids.",
            schema({"limit": {"type": "integer", "minimum": 1, "maximum": 200}}),
            list_dialogs,
            "dm-only",
        ),
        tool(
            "get_participants",
            "List the members (participants) of this group with their user ids: who is in the chat.",
            schema({"chat_id": CHAT_ID, "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}),
            get_participants,
        ),
        tool(
            "kick_user",
            "Kick (remove) a member from this group; they may rejoin. Group moderation, admins only.",
            schema({"user_id": _USER_ID}, ("user_id",)),
            kick_user,
            "admin-only",
        ),
        tool(
            "ban_user",
            "Ban a member (spammer, troll) from this group so they cannot return. Group moderation, admins only.",
            schema({"user_id": _USER_ID}, ("user_id",)),
            ban_user,
            "admin-only",
        ),
        tool(
            "unban_user",
            "Unban (lift the ban of) a user in this group so they may join again. Admins only.",
            schema({"user_id": _USER_ID}, ("user_id",)),
            unban_user,
            "admin-only",
        ),
    ]
