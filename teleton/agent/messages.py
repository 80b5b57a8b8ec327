"""How messages cross between the chat and the model: the user's text as the model reads it, who spoke,
whether a send tool already answered, and the chat a turn runs in."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.llm.client import Message
from teleton.llm.tool_loop import LoopResult
from teleton.memory.feed import reads
from teleton.privacy.quoting import forwarded
from teleton.storage.database import Database


def spoke_here(result: LoopResult, send_tools: frozenset[str], chat_id: int) -> bool:
    """Whether a send tool already put a message in this chat (a send to another chat does not count)."""
    for call in result.tool_calls:
        if call.name in send_tools:
            target = call.input.get("chat_id", chat_id)
            if not isinstance(target, int) or target == chat_id:
                return True
    return False


def texts(messages: Iterable[Message]) -> Iterator[str]:
    """Every text the model is shown of ``messages``: what was said, tool calls' input, tools' results."""
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            yield content
            continue
        for block in content:
            if block.get("type") == "tool_use":
                yield json.dumps(block.get("input"), ensure_ascii=False)
            inner = block.get("text") if block.get("type") == "text" else block.get("content")
            if isinstance(inner, str):
                yield inner
            elif isinstance(inner, list):
                yield from (b.get("text", "") for b in inner if isinstance(b, dict))


# A deep link (t.me/<bot>?start=PAYLOAD, or startgroup=) arrives as "/start PAYLOAD": Telegram allows up to 64
# characters of A-Z, a-z, 0-9, _ and -.
_START = re.compile(r"^/start(?:@\w+)?(?:\s+([A-Za-z0-9_-]{1,64}))?\s*$")


def started(text: str) -> str | None:
    """What the model is told of a ``/start``: someone opened the chat (through a link carrying a payload)."""
    found = _START.match(text.strip())
    if found is None:
        return None
    if found.group(1):
        payload = found.group(1)
        return (f'[Opened this chat through a link carrying "{payload}" (/start {payload}): greet them, say '
                "briefly what you can do, and take the link's payload into account]")  # fmt: skip
    return "[Opened this chat (/start): greet them and say briefly what you can do]"


def user_text(msg: IncomingMessage, quoted: str = "") -> str:
    """The user's message as the model reads it: sender-labelled in groups, with unanswered context and
    the message it replies to; a ``/start`` as the greeting it asks for."""
    body = started(msg.text) or msg.text.strip() or (f"[{msg.media_kind}]" if msg.media_kind else "")
    if msg.media_kind and msg.text.strip():
        body += f"\n[attached: {msg.media_kind}]"
    lines = []
    # A debounced burst rides along with the unaddressed context; the burst's own messages are to us.
    to_us = set(msg.answering)
    others = [m for m in msg.earlier_context if m.message_id not in to_us and m.text.strip()]
    burst = [m for m in msg.earlier_context if m.message_id in to_us and m.text.strip()]
    if others:
        lines.append("[Earlier messages in this chat, not addressed to you]")
        lines += [f"{sender_label(m.sender)}: {m.text.strip()}" for m in others]
    if burst:
        lines.append("[Messages to you]")
        lines += [f"{sender_label(m.sender)}: {m.text.strip()}" for m in burst]
    elif others:
        lines.append("[Message to you]")
    if quoted:
        lines.append(f"[In reply to {quoted}]")
    if msg.replaces:
        lines.append("[Edited after you answered it: answer it again; your answer will replace the earlier one]")
    lines.append(body if msg.chat.type == "dm" else f"{sender_label(msg.sender)}: {body}")
    return "\n".join(lines)


def sender_label(user: UserInfo | None) -> str:
    if user is None:
        return "someone"
    return user.display_name + (f" (@{user.username})" if user.username else "")


async def archived_chat(db: Database, chat_id: int) -> ChatInfo:
    """A chat as the feed archive knows it (scheduled turns, summaries of idle sessions). A chat the
    archive has never seen is a DM when its id is positive (Telegram's user ids), a group otherwise."""
    row = await db.read(lambda conn: reads.chat(conn, chat_id))
    if row is None:
        return ChatInfo(id=chat_id, type="dm" if chat_id > 0 else "group")
    return ChatInfo(
        id=chat_id, type=row["type"], title=row["title"] or "", username=row["username"],
        member_count=row["member_count"],
    )  # fmt: skip


async def quoted_referent(db: Database, msg: IncomingMessage) -> str:
    """The message this one replies to (same chat only), so "yes, that one" has its referent."""
    if msg.reply_to_id is None:
        return ""
    reply_to = msg.reply_to_id
    row = await db.read(lambda conn: reads.message(conn, msg.chat.id, reply_to))
    if row is None or not row["text"]:
        return ""
    who = "you" if row["is_outgoing"] else (row["sender_name"] or "someone")
    return forwarded(f"{who}: {' '.join(row['text'].split())[:300]}", row["fwd_from"])
