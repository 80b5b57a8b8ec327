"""The workspace side of forgetting: lines of memory files that hold a needle, removed in place (sync).

The owner's scope covers the text files memory is written to: the Markdown files at the workspace root
(MEMORY.md, USER.md …), ``memory/`` (notes and daily logs), ``learnings/``, ``public/`` and ``chats/`` (long
messages kept whole). Another person's scope covers their chat's folder (``chats/<id>/``) and, in the daily
logs, the lines quoted from their DM (``(from DM with … (user:<id>))``), which are their words.

A symlink is never followed, in or out of the workspace, and nothing outside it is read or written: the walk
skips links, and a file is only touched when its real path is the path walked. A rewritten file replaces the
old one atomically (a crash leaves one or the other) and stays 0600.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from teleton.memory.forget.match import Matcher
from teleton.storage.private_files import FILE_MODE, Unreadable, read_confined

FOLDERS = ("memory", "learnings", "public", "chats")
MAX_BYTES = 20_000_000  # a bigger file is not a memory file
_DAILY = re.compile(r"^memory/\d{4}-\d{2}-\d{2}\.md$")
# The origin daily_logs writes for another person's DM: "DM with <their name> (user:<id>)". The name is theirs
# (it may hold parentheses, "Ann (@ann)"): the label is the first that closes the origin before " User: ",
# and a section heading's the last one on its line.
_DM_LINE = re.compile(r"^> \[\d\d:\d\d\] \(from DM with .{0,160}? \(user:(\d+)\)\) User: ")
_DM_SECTION = re.compile(r"^## \[\d\d:\d\d\] .*\(from DM with .*\(user:(\d+)\)\)\s*$")


def is_daily_log(rel: str) -> bool:
    return _DAILY.match(rel) is not None


def scan(workspace: Path, matcher: Matcher, owner: bool, user_id: int | None) -> dict[str, int]:
    """Workspace path -> how many of its lines the scope may erase hold the needle."""
    found = {}
    for rel, lines in _files(workspace, owner, user_id):
        count = sum(1 for line, mine in _owned(rel, lines, owner, user_id) if mine and matcher.hit_line(rel, line))
        if count:
            found[rel] = count
    return found


def rewrite(workspace: Path, matcher: Matcher, owner: bool, user_id: int | None) -> dict[str, int]:
    """Remove those lines; return workspace path -> lines removed."""
    removed = {}
    root = Path(os.path.realpath(workspace))
    for rel, lines in _files(workspace, owner, user_id):
        kept = [line for line, mine in _owned(rel, lines, owner, user_id) if not (mine and matcher.hit_line(rel, line))]
        if len(kept) != len(lines):
            replace_file(root / rel, "".join(kept).encode("utf-8"))
            removed[rel] = len(lines) - len(kept)
    return removed


def _files(workspace: Path, owner: bool, user_id: int | None) -> Iterator[tuple[str, list[str]]]:
    """(path relative to the workspace, its lines) of every text file the scope covers."""
    root = Path(os.path.realpath(workspace))
    if not root.is_dir():
        return
    if owner:
        paths = [p for p in _entries(root) if p.suffix == ".md"]
        for folder in FOLDERS:
            paths += _walk(root / folder)
    else:
        paths = _walk(root / "chats" / str(int(user_id or 0)))
        paths += [p for p in _entries(root / "memory") if is_daily_log(p.relative_to(root).as_posix())]
    for path in paths:
        text = _read(root, path)
        if text is not None:
            yield path.relative_to(root).as_posix(), text.splitlines(keepends=True)


def _entries(folder: Path) -> list[Path]:
    """Regular files of ``folder`` (not links), or nothing when the folder itself is a link."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    with os.scandir(folder) as found:
        return sorted(Path(e.path) for e in found if e.is_file(follow_symlinks=False))


def _walk(folder: Path) -> list[Path]:
    if folder.is_symlink() or not folder.is_dir():
        return []
    out = []
    for base, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(base, d)))
        out += [Path(base, f) for f in sorted(files) if not os.path.islink(os.path.join(base, f))]
    return out


def _read(root: Path, path: Path) -> str | None:
    try:
        if path.stat(follow_symlinks=False).st_size > MAX_BYTES:
            return None
        text, real = read_confined(root, path)
    except (Unreadable, OSError):
        return None
    # Only a file whose real path is the path walked: no link anywhere on the way.
    return text if real == path.relative_to(root).as_posix() else None


def _owned(rel: str, lines: list[str], owner: bool, user_id: int | None) -> Iterator[tuple[str, bool]]:
    """Each line with whether the scope may erase it: the owner any; a person their chat's files whole, and
    in a daily log the lines quoted from their DM (a section's quoted body follows its heading)."""
    if owner or not is_daily_log(rel):
        yield from ((line, True) for line in lines)
        return
    mine = f"{int(user_id or 0)}"
    section: str | None = None
    for line in lines:
        heading = _DM_SECTION.match(line)
        if line.startswith("## "):
            section = heading.group(1) if heading else None
        elif not line.startswith("> "):
            section = None if line.strip() else section
        quoted = _DM_LINE.match(line)
        who = quoted.group(1) if quoted else section if line.startswith("> ") else None
        yield line, who == mine


def replace_file(path: Path, data: bytes) -> None:
    """``data`` as the whole of ``path``, 0600, through a new file renamed over the old one: never written
    through a link, and a crash leaves one whole file."""
    temp = path.with_name(f".{path.name}.forget")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), FILE_MODE)  # whatever the umask took away
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
