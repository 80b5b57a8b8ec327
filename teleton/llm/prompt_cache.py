"""Where a request's prompt-cache breakpoints go (docs/memory.md, "What the cache serves").

Anthropic caches the prefix of a request (tools, then system, then messages) up to each block marked
``cache_control``: at most 4 marks a request, and a mark finds an earlier entry at most 20 blocks back. The
prompt is laid out so that its prefix only grows (the tools of a session, the system blocks, the history;
what is new each turn after them), and the marks go where the next request will read:

1. the identity block: still read when the chat block below it changes (MEMORY.md edited, a compaction);
2. the last system block: tools and system, the same for the whole session;
3. the last message of the stored history: the next turn's request starts with the same messages and reads
   the entry written here (the turn's own user message is sent with its context, and stored without it);
4. the last block of the request: a tool loop's follow-up extends it exactly and reads the whole turn so far.

OpenAI-compatible providers drop the marks: OpenAI caches any repeated prefix by itself, llama.cpp, vLLM and
LM Studio reuse the KV cache of an unchanged one; the same layout serves them all.
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
