"""The Logs page's reading of the daemon's log file: the last lines, and what is appended after, each with its
level, filtered by a lowest level. Lines are redacted again on the way out (they were at write time: this
is the second lock on the same door)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from teleton.process.redaction import redact_text

LEVELS = ("debug", "info", "warning", "error")
TAIL_BYTES = 256_000
_CONSOLE_LEVEL = re.compile(r"\[(debug|info|warning|error|critical)\s*\]")


@dataclass(frozen=True)
class Line:
    level: str
    text: str


def level_of(line: str) -> str:
    """A JSON line's ``level``, or a console line's ``[warning ]``; info when neither says."""
    if line.startswith("{"):
        try:
            level = str(json.loads(line).get("level", "info")).lower()
        except ValueError:
            level = "info"
    else:
        found = _CONSOLE_LEVEL.search(line)
        level = found.group(1) if found else "info"
    return "error" if level == "critical" else level if level in LEVELS else "info"


def shown(lines: list[str], lowest: str) -> list[Line]:
    floor = LEVELS.index(lowest) if lowest in LEVELS else 1
    found = [Line(level_of(line), redact_text(line)) for line in lines if line.strip()]
    return [line for line in found if LEVELS.index(line.level) >= floor]


def tail(path: Path, lowest: str, count: int = 200) -> tuple[list[Line], int]:
    """The last ``count`` lines at ``lowest`` or above, and the file's size (where the live part goes on)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return [], 0
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first is cut
    return shown(lines, lowest)[-count:], size


def since(path: Path, offset: int, lowest: str) -> tuple[list[Line], int]:
    """Whole lines appended after ``offset``, and the new offset (a file rotated or cut: from its start)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            if size < offset:
                offset = 0
            handle.seek(offset)
            data = handle.read(max(0, size - offset))
    except FileNotFoundError:
        return [], 0
    end = data.rfind(b"\n") + 1  # a line still being written waits for its end
    lines = data[:end].decode("utf-8", errors="replace").splitlines()
    return shown(lines, lowest), offset + end
