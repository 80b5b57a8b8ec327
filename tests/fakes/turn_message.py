"""The parts of the user message a turn sends, as a test reads them from a request body.

A turn's message is laid out after the history (teleton/agent/stages/context.py): the retrieved context, the
turn's note (daily logs, a flush instruction, ``## Now``), the images, then what was typed, last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes.prompt_cache import blocks_of, without_marker

Body = dict[str, Any]
NOTE_SECTIONS = ("## Notes of ", "## Memory flush\n", "## Now\n")


@dataclass(frozen=True)
class TurnMessage:
    context: str  # the retrieved-context block ("" when nothing was retrieved)
    note: str  # the turn's note
    typed: str  # what the person sent

    @property
    def logs(self) -> str:
        """The daily-log sections of the note."""
        return self.note.split("## Memory flush")[0].split("## Now")[0].strip()


def turn_message(body: Body) -> TurnMessage:
    """The turn's own message: the last user message that is not tool results."""
    for message in reversed(body.get("messages", [])):
        content = message["content"]
        if message["role"] != "user" or (isinstance(content, list) and content[0].get("type") == "tool_result"):
            continue
        if isinstance(content, str):
            return TurnMessage("", "", content)
        texts = [block["text"] for block in content if block.get("type") == "text"]
        notes = [i for i, text in enumerate(texts) if text.startswith(NOTE_SECTIONS)]
        at = notes[0] if notes else len(texts) - 1
        context = "\n\n".join(texts[:at])
        return TurnMessage(context, texts[at] if notes else "", texts[-1])
    return TurnMessage("", "", "")  # a request of tool results alone, or none


def unmarked(value: Any) -> Any:
    """``value`` (a request, messages, blocks) without its cache breakpoints: what the cache compares."""
    return without_marker(value)


def prefix_blocks(body: Body) -> list[str]:
    """The request as the cache reads it, one digest a block (``prompt_cache.blocks_of``: tools, system blocks,
    each message's blocks, breakpoints left out); two requests share a prefix up to where these first differ."""
    return [block.digest for block in blocks_of(body)]


def shared_prefix(first: Body, second: Body) -> int:
    """How many blocks ``second`` shares with ``first`` from the start."""
    a, b = prefix_blocks(first), prefix_blocks(second)
    count = 0
    while count < min(len(a), len(b)) and a[count] == b[count]:
        count += 1
    return count


def marks(body: Body) -> list[int]:
    """Where a request's cache breakpoints are, as indexes into ``prefix_blocks``."""
    return [i for i, block in enumerate(blocks_of(body)) if block.ttl is not None]
