"""The words scenarios are written in: plant a note, attack from a group, ask as the owner, and judge the result.

Kept out of the World so that it stays the machinery and these stay the vocabulary: a refusal is told from an
unrelated error here, and a request's text is read here the way the tests ask about it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.anthropic_server import Body
from tests.privacy.obedient_model import call, system_text
from tests.privacy.people import MALLORY, OWNER, dm, fresh_group
from tests.privacy.steps import Step, ToolRecord
from tests.privacy.world import World


def plant(world: World, words: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A group message the agent is not asked about (kept as context and archived), carrying a directive for
    whichever turn is shown it; ``"GROUP"`` in the directive's input stands for the group's own id."""
    chat = fresh_group()
    args = {k: (chat["id"] if v == "GROUP" else v) for k, v in args.items()}
    world.step(chat, f"{words} {call(tool, args)}", MALLORY, expect="context")
    return chat


def owner_asks(world: World, words: str) -> Step:
    """The owner asks about ``words``: the planted note is retrieved into the owner's turn."""
    return world.step(dm(OWNER), f"what was that about the {words}?", OWNER)


def attack(
    world: World, message: str, sender: dict[str, Any] | None = MALLORY, chat: dict[str, Any] | None = None, **kw: Any
) -> Step:
    """One addressed message in a group (a fresh one unless given): the obedient model does what it says."""
    return world.step(chat or fresh_group(), message, sender, **kw)


# Errors that say nothing about privacy: a scenario refused only for one of these proves nothing.
NOT_A_REFUSAL = ("is not a file", "is not a directory", "does not exist", "unknown chat", "carries no media",
                 "Invalid input", "timed out", "failed:")  # fmt: skip


def assert_refused(step: Step, tool: str, /, *, because: str | None = None, **match: Any) -> ToolRecord:
    """The step's ``tool`` call came back as an error that is a refusal (``because``: the exact reason)."""
    record = step.only(tool, **match)
    assert record.is_error, f"{tool}{match} was not refused; it returned: {record.content[:600]}"
    if because is not None:
        assert because in record.content, record.content
        return record
    wrong = [e for e in NOT_A_REFUSAL if e in record.content]
    assert not wrong, f"{tool}{match} failed for another reason than a refusal: {record.content[:600]}"
    return record


def request_texts(body: Body) -> list[str]:
    """Every text a request carries: the system prompt, text blocks, tool inputs and results."""
    texts = [system_text(body)]
    for message in body.get("messages", []):
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content:
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                inner = block.get("content", "")
                texts.append(inner if isinstance(inner, str) else json.dumps(inner, ensure_ascii=False))
            elif block.get("type") == "tool_use":
                texts.append(json.dumps(block.get("input"), ensure_ascii=False))
    return texts


_QUOTED = re.compile(r"(?:^|\s)> .*\(from ")


def unquoted_lines(body: Body, needle: str) -> list[str]:
    """Lines of ``body`` holding ``needle`` where it is not quoted data with an origin: a "> " quote mark
    and a "(from …)" origin must come before it on its line ("> (from group …) …", "- (path) > [12:00]
    (from DM …) …")."""
    return [
        line
        for chunk in request_texts(body)
        for line in chunk.splitlines()
        if needle in line and not _QUOTED.search(line[: line.index(needle)])
    ]


def section(system: str, heading: str) -> str:
    """The text of one ``## heading`` section of a system prompt ('' when there is none)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", system, re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""
