"""Context compaction as pure functions: when to compact, where to cut, what the summariser reads.

The runtime does the I/O (write-then-compact: facts first, then the summary to the daily log and the
knowledge base); this module decides. The cut keeps at least the last ``keep_last`` messages and moves
earlier until the kept part starts with a user's own message, so a tool_use is never separated from its
tool_result and the kept history is a valid Messages API conversation on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from teleton.config.schema import AgentConfig, MemoryConfig, default
from teleton.storage.schema import SESSION_ARCHIVED

Message = dict[str, Any]


@dataclass(frozen=True)
class Thresholds:
    context_window: int = default(AgentConfig, "context_window")
    soft: float = default(MemoryConfig, "soft_threshold")
    hard: float = default(MemoryConfig, "hard_threshold")
    max_messages: int = default(MemoryConfig, "hard_max_messages")
    keep_last: int = default(MemoryConfig, "keep_last")


def needs_hard(message_count: int, prompt_tokens: int, t: Thresholds) -> bool:
    return message_count >= t.max_messages or prompt_tokens >= t.hard * t.context_window


def needs_soft(prompt_tokens: int, t: Thresholds) -> bool:
    return prompt_tokens >= t.soft * t.context_window


def is_user_turn(message: Message) -> bool:
    """A message the user wrote (not a tool_result carrier): a safe first message of a history."""
    if message["role"] != "user":
        return False
    content = message["content"]
    return isinstance(content, str) or not any(b.get("type") == "tool_result" for b in content)


def cut_index(messages: Sequence[Message], keep_last: int) -> int:
    """Index where the kept tail starts; 0 means nothing can be dropped."""
    if len(messages) <= keep_last:
        return 0
    start = len(messages) - keep_last
    for i in range(start, 0, -1):  # keep more rather than split a tool exchange
        if is_user_turn(messages[i]):
            return i
    for i in range(start + 1, len(messages)):  # one long tool chain: keep fewer, still well-formed
        if is_user_turn(messages[i]):
            return i
    return 0


def split(messages: Sequence[Message], keep_last: int) -> tuple[list[Message], list[Message]]:
    cut = cut_index(messages, keep_last)
    return list(messages[:cut]), list(messages[cut:])


def message_text(message: Message, per_block: int = 300) -> str:
    """What the summariser reads of one message: text and tool calls, tool output left out."""
    content = message["content"]
    if isinstance(content, str):
        return content[:per_block]
    parts = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(block["text"][:per_block])
        elif kind == "tool_use":
            parts.append(f"[called {block['name']}]")
    return " ".join(p for p in parts if p)


def _said(messages: Sequence[Message], per_message: int) -> list[tuple[Message, str]]:
    """Each message with what the summariser reads of it on one line; a message with nothing to read left out."""
    lines = [(m, message_text(m, per_message).replace("\n", " ").strip()) for m in messages]
    return [(m, text) for m, text in lines if text]


def transcript(messages: Sequence[Message], per_message: int = 300, max_chars: int = 60_000) -> str:
    joined = "\n".join(f"{m['role'].capitalize()}: {text}" for m, text in _said(messages, per_message))
    return joined[-max_chars:]  # the most recent part matters most if it must be cut


def numbered_transcript(
    messages: Sequence[Message], per_message: int = 300, max_chars: int = 60_000
) -> tuple[str, dict[int, tuple[int, int, float]]]:
    """``transcript`` with each line numbered and each user's line dated when its archive row is known: the
    text, and line number -> (chat id, message id, date) for those lines, so a fact can name its own."""
    lines: list[str] = []
    rows: dict[int, tuple[int, int, float]] = {}
    for number, (message, text) in enumerate(_said(messages, per_message), start=1):
        role, row = message["role"].capitalize(), message.get(SESSION_ARCHIVED)
        if row is not None and is_user_turn(message):
            rows[number] = (int(row[0]), int(row[1]), float(row[2]))
            role += f" ({datetime.fromtimestamp(float(row[2])):%a %d %B %Y})"
        lines.append(f"[{number}] {role}: {text}")
    return "\n".join(lines)[-max_chars:], rows


def summary_prompt(old: Sequence[Message], previous_summary: str = "") -> str:
    earlier = f"Summary of what came before:\n{previous_summary}\n\n" if previous_summary else ""
    return (
        f"{earlier}Summarise this conversation for your own future reference in under 200 words: who said "
        "what that matters, decisions, open tasks, preferences and facts learned. Plain text.\n\n"
        f"{transcript(old)}"
    )


def truncation_summary(old: Sequence[Message], max_lines: int = 20) -> str:
    """The fallback when the model cannot summarise: the user's own words of the dropped part, cut short."""
    said = [message_text(m, 200).replace("\n", " ") for m in old if is_user_turn(m)]
    said = [s for s in said if s.strip()][-max_lines:]
    head = f"[{len(old)} earlier messages were dropped without a summary (model unavailable).]"
    return "\n".join([head, *(f"- User: {s}" for s in said)])
