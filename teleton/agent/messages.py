"""How messages cross between the chat and the model: the user's text as the model reads it, who spoke,
whether a send tool already answered, and long answers cut to Telegram's size. Pure functions."""

from __future__ import annotations

from teleton.gateway.contract import IncomingMessage, UserInfo
from teleton.llm.tool_loop import LoopResult

TELEGRAM_LIMIT = 4000  # Telegram's cap is 4096 characters; leave room for entities


def spoke_here(result: LoopResult, send_tools: frozenset[str], chat_id: int) -> bool:
    """Whether a send tool already put a message in this chat (a send to another chat does not count)."""
    for call in result.tool_calls:
        if call.name in send_tools:
            target = call.input.get("chat_id", chat_id)
            if not isinstance(target, int) or target == chat_id:
                return True
    return False


def user_text(msg: IncomingMessage, quoted: str = "") -> str:
    """The user's message as the model reads it: sender-labelled in groups, with unanswered context and
    the message it replies to."""
    body = msg.text.strip() or (f"[{msg.media_kind}]" if msg.media_kind else "")
    if msg.media_kind and msg.text.strip():
        body += f"\n[attached: {msg.media_kind}]"
    lines = []
    if msg.earlier_context:
        lines.append("[Earlier messages in this chat, not addressed to you]")
        lines += [f"{sender_label(m.sender)}: {m.text.strip()}" for m in msg.earlier_context if m.text.strip()]
        lines.append("[Message to you]")
    if quoted:
        lines.append(f"[In reply to {quoted}]")
    lines.append(body if msg.chat.type == "dm" else f"{sender_label(msg.sender)}: {body}")
    return "\n".join(lines)


def split_message(text: str, limit: int = TELEGRAM_LIMIT) -> list[str]:
    """Split at paragraph or line breaks so a long answer arrives as several readable messages."""
    chunks: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        cut = rest.rfind("\n\n", 0, limit)
        if cut < limit // 2:
            cut = rest.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = limit
        chunks.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        chunks.append(rest)
    return chunks


def sender_label(user: UserInfo | None) -> str:
    if user is None:
        return "someone"
    return user.display_name + (f" (@{user.username})" if user.username else "")
