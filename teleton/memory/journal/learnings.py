"""Learnings: what went wrong before, kept where the agent will read it next time (docs/memory.md).

``learnings/errors.md`` holds failed tool calls, one line per distinct (tool, error), with a count and the
day it was last seen, so a repeated failure costs one line instead of flooding the file.
``learnings/corrections.md`` holds corrections the user made ("no, my sister is called Ana").
Both are plain Markdown the owner can read and edit, both are capped, and both go into the DM system prompt
only: a correction can be as private as anything else the owner says.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from teleton.storage.private_files import write_private

ERRORS_FILE = Path("learnings") / "errors.md"
CORRECTIONS_FILE = Path("learnings") / "corrections.md"
MAX_ENTRIES = 50
INPUT_CHARS = 120
ERROR_CHARS = 200
CORRECTION_CHARS = 300

_ERROR_LINE = re.compile(
    r"^- `(?P<tool>[^`]+)` (?P<input>.*?) -> (?P<error>.*) \(seen (?P<count>\d+)x, last (?P<last>[\d-]+)\)$"
)
_CORRECTION_LINE = re.compile(r"^- (?P<day>\d{4}-\d{2}-\d{2}): (?P<text>.+)$")


@dataclass
class ErrorEntry:
    tool: str
    input: str
    error: str
    count: int
    last: str

    def line(self) -> str:
        return f"- `{self.tool}` {self.input} -> {self.error} (seen {self.count}x, last {self.last})"


def _flat(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_key(tool: str, error: str) -> tuple[str, str]:
    # Numbers vary between otherwise identical failures (ids, sizes, seconds); they must not split entries.
    return tool, re.sub(r"\d+", "#", error.lower())


def parse_errors(text: str) -> list[ErrorEntry]:
    entries = []
    for line in text.splitlines():
        match = _ERROR_LINE.match(line.strip())
        if match:
            entries.append(
                ErrorEntry(match["tool"], match["input"], match["error"], int(match["count"]), match["last"])
            )
    return entries


def record_error(entries: list[ErrorEntry], tool: str, tool_input: str, error: str, day: str) -> list[ErrorEntry]:
    """Add one failure: bump the matching entry or append a new one; keep the newest MAX_ENTRIES."""
    error = _flat(error, ERROR_CHARS)
    key = _error_key(tool, error)
    for entry in entries:
        if _error_key(entry.tool, entry.error) == key:
            entry.count += 1
            entry.last = day
            entry.input = _flat(tool_input, INPUT_CHARS)
            entry.error = error
            break
    else:
        entries.append(ErrorEntry(tool, _flat(tool_input, INPUT_CHARS), error, 1, day))
    entries.sort(key=lambda e: e.last, reverse=True)
    return entries[:MAX_ENTRIES]


def render_errors(entries: list[ErrorEntry]) -> str:
    body = "\n".join(entry.line() for entry in entries)
    return "# Tool errors\n\nFailed tool calls, newest first. Avoid repeating them.\n\n" + body + "\n"


def add_correction(text: str, correction: str, day: str) -> str | None:
    """Return the new file text, or None when the same correction is already there."""
    correction = _flat(correction, CORRECTION_CHARS)
    lines = [m for m in (_CORRECTION_LINE.match(x.strip()) for x in text.splitlines()) if m]
    if any(m["text"].lower() == correction.lower() for m in lines):
        return None
    kept = [f"- {m['day']}: {m['text']}" for m in lines][-(MAX_ENTRIES - 1) :]
    body = "\n".join([*kept, f"- {day}: {correction}"])
    return "# Corrections\n\nThings the owner corrected. They override older beliefs.\n\n" + body + "\n"


class Learnings:
    """File-backed learnings of one workspace; file I/O runs in a thread."""

    def __init__(self, workspace: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.workspace = workspace
        self._clock = clock
        self._lock = asyncio.Lock()

    def _day(self) -> str:
        return time.strftime("%Y-%m-%d", time.localtime(self._clock()))

    async def record_error(self, tool: str, tool_input: str, error: str) -> None:
        path = self.workspace / ERRORS_FILE
        day = self._day()

        def _write() -> None:
            entries = parse_errors(path.read_text(encoding="utf-8")) if path.exists() else []
            write_private(path, render_errors(record_error(entries, tool, tool_input, error, day)))

        async with self._lock:
            await asyncio.to_thread(_write)

    async def record_correction(self, correction: str) -> bool:
        path = self.workspace / CORRECTIONS_FILE
        day = self._day()

        def _write() -> bool:
            text = path.read_text(encoding="utf-8") if path.exists() else ""
            updated = add_correction(text, correction, day)
            if updated is None:
                return False
            write_private(path, updated)
            return True

        async with self._lock:
            return await asyncio.to_thread(_write)

    async def for_prompt(self, max_chars: int = 3000) -> str:
        """Both files, capped, as one block for the DM system prompt ('' when there is nothing)."""

        def _read() -> str:
            parts = []
            for rel, title in ((CORRECTIONS_FILE, "Corrections from the owner"), (ERRORS_FILE, "Past tool errors")):
                path = self.workspace / rel
                if not path.exists():
                    continue
                lines = [x for x in path.read_text(encoding="utf-8").splitlines() if x.startswith("- ")]
                if lines:
                    parts.append(f"## {title}\n" + "\n".join(lines))
            text = "\n\n".join(parts)
            return text if len(text) <= max_chars else text[: max_chars - 1] + "…"

        return await asyncio.to_thread(_read)
