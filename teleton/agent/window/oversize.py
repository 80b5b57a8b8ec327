"""Messages too long for a prompt (a pasted log, a whole file through ``teleton chat``).

One message must never wedge a conversation: it would stay in every later request until the session ends.
So an incoming message over ``agent.max_input_chars`` is kept whole — in the archive (the Telegram layer
already wrote it) and as a workspace file of its chat, which the agent can read in parts with
``workspace_read`` — and the model, retrieval, the daily log and the distiller get its head, its tail and a
note saying what was cut and where the whole text is. The same holds for a group's unanswered messages that
ride along with the next one addressed to the agent. A session that still overflows the model after a
compaction (say, it holds a paste from before this limit) has its oversized messages cut the same way.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from teleton.gateway.contract import IncomingMessage
from teleton.privacy.paths import chat_dir
from teleton.storage.private_files import write_private

HEAD_SHARE = 0.75  # of the characters kept: the head says what it is, the tail where it ended


def excerpt(text: str, limit: int, where: str = "") -> str:
    """``text`` itself when it fits in ``limit`` characters, else its head and tail around a note."""
    if len(text) <= limit:
        return text
    head = text[: int(limit * HEAD_SHARE)]
    tail = text[len(text) - (limit - len(head)) :]
    cut = len(text) - len(head) - len(tail)
    note = f"[… {cut:,} of {len(text):,} characters cut here"
    if where:
        note += f"; the whole text is the workspace file {where}: read it in parts with workspace_read"
    note += " …]"
    return f"{head}\n\n{note}\n\n{tail}"


def paste_path(msg: IncomingMessage) -> str:
    """Where the whole text of an oversized message is kept: a file of its chat (the chat's label)."""
    return (chat_dir("chats", msg.chat.id) / "long-messages" / f"{msg.message_id}.txt").as_posix()


async def shorten(workspace: Path, msg: IncomingMessage, limit: int) -> IncomingMessage:
    """``msg`` with its text cut to ``limit`` characters, the whole text saved in the workspace first."""
    rel = paste_path(msg)
    await asyncio.to_thread(write_private, workspace / rel, msg.text, stop_at=workspace)
    return replace(msg, text=excerpt(msg.text, limit, rel))


async def fit(workspace: Path, msg: IncomingMessage, limit: int) -> IncomingMessage:
    """``msg`` with every text over ``limit`` shortened: its own and those of the group's unanswered messages
    riding along with it (``earlier_context``), which the model reads in the same user message. ``msg``
    itself when everything fits."""
    earlier = tuple([await fit(workspace, m, limit) for m in msg.earlier_context])
    if any(new is not old for new, old in zip(earlier, msg.earlier_context, strict=True)):
        msg = replace(msg, earlier_context=earlier)
    return await shorten(workspace, msg, limit) if len(msg.text) > limit else msg


def shorten_history(messages: list[dict[str, Any]], limit: int) -> int:
    """Cut every text over ``limit`` characters in session messages, in place; how many were cut."""
    cut = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            if len(content) > limit:
                message["content"] = excerpt(content, limit)
                cut += 1
            continue
        for block in content if isinstance(content, list) else []:
            for key in ("text", "content"):
                if isinstance(block.get(key), str) and len(block[key]) > limit:
                    block[key] = excerpt(block[key], limit)
                    cut += 1
    return cut
