"""Observation masking: old tool results shrink to one line so the context window holds the conversation.

Rule (docs/memory.md): the ``keep`` most recent tool results stay whole, error results always stay whole, every
older result becomes ``[Tool: name - OK]``; in steps: nothing is masked until ``keep + step`` results are held,
then the oldest are masked down to ``keep``, and so on. Masking rewrites old history, which the prompt cache
then has to write again from there: between two steps every request extends the previous one's prefix. A pure
function over messages in the Messages API format, so the runtime can apply it both to what it sends and to
what it stores (the same count of results, so the same messages masked), and a test can check it directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Message = dict[str, Any]


def masked_text(tool_name: str) -> str:
    return f"[Tool: {tool_name} - OK]"


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """tool_use id -> tool name, from the assistant turns."""
    names: dict[str, str] = {}
    for message in messages:
        if message["role"] == "assistant" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_use":
                    names[block["id"]] = block["name"]
    return names


def masked_count(held: int, keep: int, step: int) -> int:
    """How many of ``held`` tool results (the oldest, masked ones included) are masked: a multiple of ``step``."""
    return max(0, held - keep) // step * step


def mask_observations(messages: Sequence[Message], keep: int = 10, step: int = 1) -> list[Message]:
    """A copy of ``messages`` with the oldest successful tool results masked, in steps of ``step``."""
    positions = [
        (i, j)
        for i, message in enumerate(messages)
        if message["role"] == "user" and isinstance(message["content"], list)
        for j, block in enumerate(message["content"])
        if block.get("type") == "tool_result"
    ]
    old = positions[: masked_count(len(positions), keep, step)]
    if not old:
        return list(messages)
    names = tool_names(messages)
    result = list(messages)
    for i, j in old:
        block = result[i]["content"][j]
        if block.get("is_error"):
            continue  # errors explain what went wrong later; they are short and worth keeping
        replacement = masked_text(names.get(block["tool_use_id"], "tool"))
        if block.get("content") == replacement:
            continue
        if result[i] is messages[i]:  # copy a message once, never mutate the caller's
            result[i] = {**messages[i], "content": list(messages[i]["content"])}
        result[i]["content"][j] = {**block, "content": replacement}
    return result
