"""Where a request's prompt-cache breakpoints go (docs/memory.md, "What the cache serves").

Anthropic caches a request's prefix (tools, then system, then messages) up to each block marked ``cache_control``:
at most 4 marks, each finding an earlier entry at most 20 blocks back. The marks go where the next request reads:
the identity block, the last system block, the last message of the stored history, and the request's last block
(a tool loop's follow-up extends it exactly). OpenAI-compatible providers drop the marks; the layout serves them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Block = dict[str, Any]
Message = dict[str, Any]


def mark(ttl: str = "5m") -> Block:
    """The ``cache_control`` of one breakpoint; 5 minutes is the API's default and is sent as it is."""
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def marked_system(blocks: Sequence[Block], ttl: str = "5m") -> list[Block]:
    """The system blocks with marks 1 and 2 (one mark when there is one block); a copy."""
    marked = [dict(block) for block in blocks]
    for index in {0, len(marked) - 1} if marked else ():
        marked[index]["cache_control"] = mark(ttl)
    return marked


def marked_messages(messages: Sequence[Message], history_end: int, ttl: str = "5m") -> list[Message]:
    """``messages`` with marks 3 (on message ``history_end``, the stored history's last; -1: none) and 4 (on
    the last message); a copy where marked, the caller's messages untouched."""
    result = list(messages)
    for index in sorted({history_end, len(result) - 1}):
        if 0 <= index < len(result):
            result[index] = _marked_last_block(result[index], ttl)
    return result


def _marked_last_block(message: Message, ttl: str) -> Message:
    content = message["content"]
    text_only = isinstance(content, str)
    blocks: list[Block] = [{"type": "text", "text": content}] if text_only else [dict(b) for b in content]
    if not blocks:
        return message
    blocks[-1]["cache_control"] = mark(ttl)
    return {**message, "content": blocks}
