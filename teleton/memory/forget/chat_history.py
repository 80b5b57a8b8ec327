"""What was typed in ``teleton chat``: the entries of its input history that hold a needle, removed (sync).

prompt_toolkit's ``FileHistory`` appends each entry as a ``# <timestamp>`` line after a blank one, then the
entry's text, every line prefixed with ``+``; whatever is not a ``+`` line separates entries. An entry whose
text holds the needle goes whole, with the lines before it (its timestamp); every other byte stays as it was.
The new file replaces the old one atomically and is 0600, like the file it replaces. The history holds only
what the owner typed, so only the owner's scope reads or rewrites it.
"""

from __future__ import annotations

from pathlib import Path

from teleton.memory.forget.files import replace_file
from teleton.memory.forget.match import Matcher


def scan(path: Path, matcher: Matcher) -> int:
    """How many entries of the history hold the needle (0 when there is no history)."""
    return sum(1 for _, text in _entries(path) if matcher.hit(text))


def rewrite(path: Path, matcher: Matcher) -> int:
    """Remove those entries; return how many were removed."""
    entries = _entries(path)
    kept = [raw for raw, text in entries if not matcher.hit(text)]
    removed = len(entries) - len(kept)
    if removed:
        replace_file(path, b"".join(kept))
    return removed


def _entries(path: Path) -> list[tuple[bytes, str]]:
    """(the entry's bytes with the separator lines before it, its text); the file's tail after the last
    entry is an entry with no text."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    entries: list[tuple[bytes, str]] = []
    raw: list[bytes] = []
    text: list[bytes] = []
    for line in data.splitlines(keepends=True):
        if not line.startswith(b"+") and text:  # the entry before this line is complete
            entries.append((b"".join(raw), _decoded(text)))
            raw, text = [], []
        raw.append(line)
        if line.startswith(b"+"):
            text.append(line[1:])
    if raw:
        entries.append((b"".join(raw), _decoded(text)))
    return entries


def _decoded(lines: list[bytes]) -> str:
    return b"".join(lines).decode("utf-8", errors="replace").removesuffix("\n")
