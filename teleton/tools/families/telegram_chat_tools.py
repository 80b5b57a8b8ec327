"""Telegram tools people expect beyond one message: a poll's results and closing it, Telegram's own scheduled
messages, marking a chat read, a sticker, joining and leaving chats, and Telegram's server-side search.

Thin wrappers over the Gateway contract with the chat rules of ``telegram_common``: what acts on the account as
a whole is the owner's alone (``owner_only``); a message scheduled into another chat goes through the outbox as
``send_message`` does, its time part of what is approved; what ``search_telegram`` finds is archived and shown
quoted with its origin (docs/telegram.md, "Tools"; docs/privacy.md).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from typing import Any

from teleton.gateway.contract import ChatInfo, IncomingMessage
from teleton.privacy.egress import OUTSIDE, Way, decide
from teleton.privacy.labels import PUBLIC
from teleton.privacy.quoting import forwarded, label_origin, quote_lines, shown_to
from teleton.scheduler.task_store import TaskError
from teleton.tools.families.tasks import parse_when
from teleton.tools.families.telegram_common import (
    CHAT_ID,
    Handler,
    Refused,
    deps_gateway,
    gateway,
    outbox,
    readable_chat,
    tool,
    writable_chat,
)
from teleton.tools.held import Held, Outgoing
from teleton.tools.registry import Release, Tool, ToolContext, ToolDeps, schema

SEARCH_LIMIT = 50
_POLL_ID = {"type": "integer", "description": "the id of the poll's message (see get_history)"}
_TEXT = {"type": "string", "minLength": 1, "maxLength": 4096}
_AT = {"type": "string", "description": "when, an ISO date-time like 2026-05-01T09:00 (local time) or with an offset"}
_DELAY = {"type": "number", "minimum": 1, "maximum": 525_600, "description": "or: in this many minutes"}
_IDS = {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 100}
_CHAT = {"type": ["integer", "string"], "description": "chat id, @username or invite link"}


# -- polls ------------------------------------------------------------------------------------------------
async def poll_results(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = readable_chat(args, ctx)
    message_id = int(args["message_id"])
    question, options, closed = await gateway(ctx).poll_results(chat_id, message_id)
    total = sum(votes or 0 for _, votes in options)
    lines = [f"Poll #{message_id} ({'closed' if closed else 'open'}, {total} votes): {question}"]
    for option, votes in options:
        share = f" ({votes * 100 // total}%)" if votes and total else ""
        lines.append(f"- {option}: {'hidden' if votes is None else votes}{share}")
    if any(votes is None for _, votes in options):
        lines.append("Telegram shows the hidden counts only after voting, or once the poll is closed.")
    text = "\n".join(lines)
    label = ctx.deps.principals.chat_label(chat_id)
    # Another chat's poll is its people's words: quoted with its origin (the owner alone may read it).
    return text if label in (ctx.clearance.label, PUBLIC) else quote_lines(text, label_origin(label))


async def close_poll(args: dict[str, Any], ctx: ToolContext) -> str:
    if ctx.chat.type != "dm" and not ctx.is_admin:
        raise Refused("Only an admin can have me close a poll in a group.")
    message_id = int(args["message_id"])
    await gateway(ctx).close_poll(ctx.chat.id, message_id)
    return f"Closed the poll #{message_id}: nobody can vote any more; its results stay."


# -- Telegram's own scheduled messages ----------------------------------------------------------------------
def _when(args: dict[str, Any]) -> float:
    if args.get("at") is None and args.get("delay_minutes") is None:
        raise Refused("When? Give at (a date-time) or delay_minutes.")
    try:
        when, _ = parse_when(args, time.time())
    except TaskError as exc:
        raise Refused(str(exc)) from None
    if when <= time.time():  # Telegram refuses a time already past; the model is asked for a future one
        raise Refused(f"{_at(when)} is not in the future; give a later time.")
    return when


def _at(when: float) -> str:
    return f"{datetime.fromtimestamp(when).astimezone():%Y-%m-%d %H:%M %Z}".strip()


async def list_scheduled(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = readable_chat(args, ctx)
    waiting = await gateway(ctx).list_scheduled(chat_id)
    if not waiting:
        return f"Nothing is scheduled in chat {chat_id}."
    return "\n".join(f"#{message_id} at {_at(when)}: {text}" for message_id, when, text in waiting)


async def schedule_message(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = writable_chat(args, ctx)
    when = _when(args)
    if chat_id != ctx.chat.id:
        meta = {"schedule_date": when}  # in the digest: what the owner approves is these words at this time
        out = Outgoing("message", args["text"].encode(), to_chat_id=chat_id, meta=meta, tool="schedule_message")
        return await outbox(ctx).send(ctx, out)
    sent = await gateway(ctx).schedule_message(chat_id, args["text"], when)
    return f"Scheduled message #{sent.message_id} in chat {chat_id} for {_at(when)}: Telegram sends it then."


async def release_scheduled(item: Held, deps: ToolDeps) -> str:
    """A scheduled message the owner approved (or the outbox allowed): exactly its text, for its time."""
    when = float(item.meta["schedule_date"])
    if when <= time.time():
        raise Refused(f"its time ({_at(when)}) passed before it was approved; nothing was scheduled")
    sent = await deps_gateway(deps).schedule_message(int(item.to_chat_id or 0), item.text, when)
    return f"Scheduled for chat {item.to_chat_id} at {_at(when)} as scheduled message #{sent.message_id}."


async def cancel_scheduled(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = int(args.get("chat_id", ctx.chat.id))
    ids = [int(i) for i in args["message_ids"]]
    await gateway(ctx).cancel_scheduled(chat_id, ids)
    return f"Cancelled {len(ids)} scheduled message(s) in chat {chat_id}; they will not be sent."


# -- reading, stickers, joining and leaving ------------------------------------------------------------------
async def mark_read(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = int(args["chat_id"])
    await gateway(ctx).mark_read(chat_id)
    return f"Marked every message of chat {chat_id} as read."


async def send_sticker(args: dict[str, Any], ctx: ToolContext) -> str:
    sent = await gateway(ctx).send_sticker(ctx.chat.id, args["emoji"])
    return f"Sent a {args['emoji']} sticker (message {sent.message_id})."


async def send_gif(args: dict[str, Any], ctx: ToolContext) -> str:
    query = str(args["query"])
    # The words leave for Telegram's GIF bot and the GIF provider behind it: a fetch, by the fetch rule. Not
    # worth the owner's approval: a GIF search a steered turn was not typed is refused, not held.
    typed = " ".join(query.split()).lower() in " ".join(ctx.typed.split()).lower()
    decision = decide("deny", ctx.taint, ctx.clearance.label, Way("fetch", OUTSIDE, typed=typed))
    if decision.verdict != "allow":
        raise Refused(f"Not searched: {decision.why}. I search GIFs for words someone here typed.")
    sent = await gateway(ctx).send_gif(ctx.chat.id, query)
    return f"Sent a GIF for {args['query']!r} (message {sent.message_id})."


def _describe(chat: ChatInfo) -> str:
    extra = f", @{chat.username}" if chat.username else ""
    return f"{chat.title or '(no title)'} (id {chat.id}, {chat.type}{extra})"


def _asked_by_the_owner(target: str, ctx: ToolContext) -> None:
    """Joining shows the account to a chat, leaving drops it: from a turn something else steered (another
    chat's words, a fetched page, a planted note), only a chat the owner named in this very message."""
    steered = ctx.taint.steering(ctx.clearance.label)
    # A whole word of the message: "t.me/+Ab" is not asked for by a message naming "t.me/+Abc123".
    said = {word.strip(".,;:!?()[]<>\"'«»").lower() for word in ctx.typed.split()}
    if steered and target.strip().lower() not in said:
        raise Refused(f"This conversation was shown words from elsewhere; I join or leave {target} only when you "
                      "write it in your own message.")  # fmt: skip


async def join_chat(args: dict[str, Any], ctx: ToolContext) -> str:
    _asked_by_the_owner(str(args["link"]), ctx)
    chat = await gateway(ctx).join_chat(args["link"])
    return f"Joined {_describe(chat)}."


async def leave_chat(args: dict[str, Any], ctx: ToolContext) -> str:
    chat: int | str = args["chat"]
    _asked_by_the_owner(str(chat), ctx)
    if isinstance(chat, str) and chat.strip().lstrip("-").isdigit():
        chat = int(chat)
    await gateway(ctx).leave_chat(chat)
    return f"Left {chat}."


# -- Telegram's search ----------------------------------------------------------------------------------
def _hit_line(hit: IncomingMessage) -> str:
    when = datetime.fromtimestamp(hit.date).astimezone()
    who = "me" if hit.is_outgoing else (hit.sender.display_name if hit.sender else "?")
    media = f" [{hit.media_kind}]" if hit.media_kind else ""
    return forwarded(f"[chat {hit.chat.id} #{hit.message_id} {when:%Y-%m-%d %H:%M} {who}]{media} {hit.text}",
                     hit.forwarded_from)  # fmt: skip


async def search_telegram(args: dict[str, Any], ctx: ToolContext) -> str:
    chat_id = readable_chat(args, ctx) if "chat_id" in args else None
    limit = int(args.get("limit", 20))
    hits = await gateway(ctx).search_telegram(args["query"], chat_id, limit)
    if not hits:
        return "Telegram found no matching messages."
    labels = {hit.chat.id: ctx.deps.principals.chat_label(hit.chat.id) for hit in hits}
    ctx.shown(*labels.values())
    # Other chats' words come quoted with their origin: data for the owner's turn, never its instructions.
    lines = [shown_to(ctx.clearance.label, labels[h.chat.id], _hit_line(h), h.chat.title) for h in hits]
    return "\n".join([*lines, f"({len(hits)} found on Telegram; all of them are in the archive now.)"])


# -- the tool list ------------------------------------------------------------------------------------------
def _owners(name: str, description: str, props: dict[str, Any], required: tuple[str, ...], handler: Handler,
            release: Release | None = None) -> Tool:  # fmt: skip
    """A tool that acts on the agent's account as a whole: offered to and run for the owner alone."""
    return replace(tool(name, description, schema(props, required), handler, "dm-only", release), owner_only=True)


def chat_tools() -> list[Tool]:
    return [
        tool(
            "poll_results",
            "Show how a poll is going: its question and each option's vote count and share, and whether it is "
            "closed (poll results, votes, who is winning).",
            schema({"message_id": _POLL_ID, "chat_id": CHAT_ID}, ("message_id",)),
            poll_results,
        ),
        tool(
            "close_poll",
            "Close (stop, end) a poll you sent in this chat: no more votes, the results stay.",
            schema({"message_id": _POLL_ID}, ("message_id",)),
            close_poll,
        ),
        _owners(
            "list_scheduled",
            "List the messages waiting in Telegram's own schedule of a chat (scheduled to be sent later), "
            "with their ids and times.",
            {"chat_id": CHAT_ID},
            (),
            list_scheduled,
        ),
        _owners(
            "schedule_message",
            "Schedule a message with Telegram itself: Telegram sends it to this chat (or another by chat_id) at "
            "a date-time or after a delay, even while I am offline. For a reminder that I act on, use "
            "schedule_task.",
            {"text": _TEXT, "chat_id": CHAT_ID, "at": _AT, "delay_minutes": _DELAY},
            ("text",),
            schedule_message,
            release_scheduled,
        ),
        _owners(
            "cancel_scheduled",
            "Cancel (delete) messages waiting in Telegram's schedule of a chat, by their ids from list_scheduled.",
            {"message_ids": _IDS, "chat_id": CHAT_ID},
            ("message_ids",),
            cancel_scheduled,
        ),
        _owners(
            "mark_read",
            "Mark every message of a chat as read on Telegram (clear its unread count).",
            {"chat_id": {"type": "integer", "description": "the chat's id (see list_dialogs)"}},
            ("chat_id",),
            mark_read,
        ),
        tool(
            "send_sticker",
            "Send a sticker matching an emoji (like 👍, 😂, 🎉, ❤️) to this chat.",
            schema({"emoji": {"type": "string", "minLength": 1, "maxLength": 16}}, ("emoji",)),
            send_sticker,
        ),
        tool(
            "send_gif",
            "Send a GIF (animation) found by words or an emoji, like 'happy dance' or 🎉, to this chat.",
            schema({"query": {"type": "string", "minLength": 1, "maxLength": 64}}, ("query",)),
            send_gif,
        ),
        _owners(
            "join_chat",
            "Join a Telegram group or channel by its invite link (t.me/+…, t.me/joinchat/…) or public @username.",
            {"link": {"type": "string", "minLength": 2, "maxLength": 300, "description": "invite link or @username"}},
            ("link",),
            join_chat,
        ),
        _owners(
            "leave_chat",
            "Leave (exit, quit) a Telegram group or channel, given by its id, @username or invite link.",
            {"chat": _CHAT},
            ("chat",),
            leave_chat,
        ),
        _owners(
            "search_telegram",
            "Search Telegram itself for messages (in one chat, or in all chats), reaching further back than the "
            "archive; what it finds is added to the archive. Use search_messages first.",
            {
                "query": {"type": "string", "minLength": 1, "maxLength": 500},
                "chat_id": {"type": "integer", "description": "only this chat (default: every chat)"},
                "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT},
            },
            ("query",),
            search_telegram,
        ),
    ]
