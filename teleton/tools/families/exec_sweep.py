"""What ``exec`` writes where others read is moved aside, to the owner's ``exec-output/`` (issue 29).

A file's label comes from its path, which a shell ignores (``cp MEMORY.md public/``), so files exec writes get
the turn's label: the owner's. ``snapshot`` before the command records every entry that is not the owner's
(lstat only) and keeps a copy of the small ones; ``sweep`` after it, however it ended, moves each new or changed
one to ``exec-output/<run id>/`` and writes kept copies back. What counts as changed, folders, symlinks and the
known gap: docs/privacy.md, "Files a command writes". Synchronous: the caller runs both in a worker thread.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import structlog

from teleton.privacy.labels import OWNER
from teleton.privacy.paths import PERSONA_FILES
from teleton.storage.private_files import DIR_MODE, FILE_MODE

log = structlog.get_logger(__name__)

OUTPUT_DIR = "exec-output"
BACKUP_FILE_MAX = 1024 * 1024  # bytes: larger files are not kept (moved aside only, their old text lost)
NOTE_LINES = 20  # moved entries listed one by one in the tool result; the rest counted

LabelOf = Callable[[str], str]
_runs = itertools.count(1)


class Stamp(NamedTuple):
    """What one entry looked like (from lstat)."""

    kind: str  # "file" | "dir" | "link" | "other"
    dev: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    def same_as(self, other: Stamp) -> bool:
        if (self.kind, self.dev, self.inode) != (other.kind, other.dev, other.inode):
            return False
        return self.kind == "dir" or (self.size, self.mtime_ns, self.ctime_ns) == (
            other.size,
            other.mtime_ns,
            other.ctime_ns,
        )


@dataclass(frozen=True)
class Snapshot:
    """The non-owner-labelled part of the workspace before a command: a stamp of every entry (by its
    workspace-relative posix path) and the bytes of the small regular files among them."""

    entries: Mapping[str, Stamp] = field(default_factory=dict)
    backups: Mapping[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Moved:
    path: str  # workspace-relative path the command wrote (lexical, as found)
    moved_to: str  # workspace-relative path under exec-output/<run id>/ where it now is ('' if it was removed)
    restored: bool  # the earlier content of ``path`` was put back


def new_run_id() -> str:
    """Unique per run: a UTC timestamp, the process id and a counter."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{next(_runs)}"


def snapshot(workspace: Path, label_of: LabelOf, *, backup_cap: int = 16 * 1024 * 1024) -> Snapshot:
    """Stamps of every non-owner entry of ``workspace``, and copies of its regular files of at most 1 MB
    each, ``backup_cap`` bytes in all: persona files first, then the smallest."""
    entries: dict[str, Stamp] = {}
    for rel, stamp in _walk(workspace):
        if label_of(rel) != OWNER:
            entries[rel] = stamp
    small = [rel for rel, s in entries.items() if s.kind == "file" and s.size <= BACKUP_FILE_MAX]
    small.sort(key=lambda rel: (rel not in PERSONA_FILES, entries[rel].size, rel))
    backups: dict[str, bytes] = {}
    total = 0
    for rel in small:
        if total + entries[rel].size > backup_cap:
            continue
        data = _read_kept(workspace / rel, entries[rel])
        if data is not None:
            backups[rel] = data
            total += len(data)
    return Snapshot(entries=entries, backups=backups)


def sweep(workspace: Path, before: Snapshot, label_of: LabelOf, *, run_id: str) -> list[Moved]:
    """Move every non-owner entry that is new or changed since ``before`` to ``exec-output/<run_id>/``,
    putting the kept copy back where there is one. Returns what was moved, in walk order."""
    output = _Output(workspace, run_id)
    moved: list[Moved] = []
    stack = [""]
    while stack:
        folder = stack.pop()
        for rel, stamp in _scan(workspace, folder):
            if label_of(rel) != OWNER:
                earlier = before.entries.get(rel)
                if earlier is None or not earlier.same_as(stamp):
                    done = _set_aside(workspace, rel, stamp, before, label_of, output)
                    if done is not None:
                        moved.append(done)
                    continue
            if stamp.kind == "dir":
                stack.append(rel)
    return moved


def describe(moved: list[Moved]) -> str:
    """The lines added to the tool result when something was moved."""
    lines = ["The command wrote where others can read:"]
    for item in moved[:NOTE_LINES]:
        if item.moved_to:
            line = f"- {item.path} → moved to {item.moved_to} (only you can read it)"
        else:
            line = f"- {item.path} → removed (it could not be moved to {OUTPUT_DIR}/)"
        if item.restored:
            line += f"; the earlier {item.path} was put back"
        lines.append(line)
    if len(moved) > NOTE_LINES:
        lines.append(f"- … and {len(moved) - NOTE_LINES} more under {OUTPUT_DIR}/")
    lines.append(
        "To publish a file, move it with workspace_rename: you will be shown exactly what leaves and asked to approve."
    )
    return "\n".join(lines)


# --- walking -------------------------------------------------------------------------------------------------


def _stamp(st: os.stat_result) -> Stamp:
    mode = st.st_mode
    kind = "dir" if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "file" if stat.S_ISREG(mode) else "other"
    return Stamp(kind, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _scan(workspace: Path, folder: str) -> list[tuple[str, Stamp]]:
    """The entries of one folder (lstat, sorted); ``exec-output/`` at the root is left out."""
    path = workspace / folder if folder else workspace
    try:
        names = os.listdir(path)
    except PermissionError:  # the command made it unlistable; workspace folders are 0700 (private_files)
        os.chmod(path, DIR_MODE)
        names = os.listdir(path)
    found = []
    for name in sorted(names):
        if not folder and name == OUTPUT_DIR:
            continue
        try:
            st = os.lstat(path / name)
        except FileNotFoundError:  # gone between listing and looking: deleted
            continue
        found.append((f"{folder}/{name}" if folder else name, _stamp(st)))
    return found


def _walk(workspace: Path, top: str = "") -> Iterator[tuple[str, Stamp]]:
    """Every entry under ``top`` (pre-order), never through a symlink."""
    stack = [top]
    while stack:
        folder = stack.pop()
        entries = _scan(workspace, folder)
        yield from entries
        stack.extend(rel for rel, stamp in reversed(entries) if stamp.kind == "dir")


def _read_kept(path: Path, stamp: Stamp) -> bytes | None:
    """The bytes of a regular file if it is still the one stamped (no symlink followed, no FIFO opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino, st.st_size) != (stamp.dev, stamp.inode, stamp.size):
            return None
        data = fh.read(stamp.size + 1)
    return data if len(data) == stamp.size else None


# --- moving --------------------------------------------------------------------------------------------------


class _Output:
    """``exec-output/<run id>/``, made by the sweep itself (0700) the first time something is moved."""

    def __init__(self, workspace: Path, run_id: str) -> None:
        self.workspace = workspace
        self.run_id = run_id
        self.root: Path | None = None

    def rel(self, rel: str) -> str:
        return f"{OUTPUT_DIR}/{self.run_id}/{rel}"

    def ready(self) -> Path:
        """The run folder: always a fresh one this sweep made, never one the command left ready."""
        if self.root is not None:
            return self.root
        base = self.workspace / OUTPUT_DIR
        try:
            st: os.stat_result | None = os.lstat(base)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):  # a symlink (into public/?) or a file: set it aside
            aside = self.workspace / f"{OUTPUT_DIR}.displaced-{self.run_id}"
            os.rename(base, aside)
            log.warning("exec_output_dir_displaced", moved_to=aside.name)
            st = None
        if st is None:
            _mkdir_private(base)
        run_id = self.run_id
        for attempt in itertools.count(1):
            try:
                _mkdir_private(base / run_id)
                break
            except FileExistsError:
                run_id = f"{self.run_id}-{attempt}"
        self.run_id = run_id
        self.root = base / run_id
        return self.root

    def place_for(self, rel: str) -> Path:
        """Where ``rel`` goes, its folders made (0700) inside the run folder."""
        current = self.ready()
        for part in Path(rel).parts[:-1]:
            current = current / part
            try:
                _mkdir_private(current)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(current).st_mode):
                    raise
        return self.ready() / rel


def _mkdir_private(path: Path) -> None:
    os.mkdir(path, DIR_MODE)
    os.chmod(path, DIR_MODE)  # whatever the umask


def _set_aside(
    workspace: Path, rel: str, stamp: Stamp, before: Snapshot, label_of: LabelOf, output: _Output
) -> Moved | None:
    """Move ``rel`` (a folder as a whole) into the run folder, or delete it when it cannot go there."""
    src = workspace / rel
    output.ready()
    inside = [path for path, _ in _walk(workspace, rel)] if stamp.kind == "dir" else []
    # exec-output/ is the owner's unless a privacy.shared_paths pattern (``*.md``) reaches into it.
    private_there = all(label_of(output.rel(path)) == OWNER for path in [rel, *inside])
    moved_to = ""
    if private_there:
        try:
            os.rename(src, output.place_for(rel))
            moved_to = output.rel(rel)
        except OSError as exc:
            if not os.path.lexists(src):
                return None  # gone meanwhile: nothing to set aside
            log.warning("exec_output_not_moved", path=rel, error=str(exc))
    else:
        log.warning("exec_output_not_moved", path=rel, error=f"{OUTPUT_DIR}/ is not the owner's there")
    if not moved_to:  # leaves nothing readable; no copy is made anywhere
        if stamp.kind == "dir":
            shutil.rmtree(src)
        else:
            os.unlink(src)
    data = before.backups.get(rel)
    return Moved(path=rel, moved_to=moved_to, restored=data is not None and _put_back(src, data))


def _put_back(path: Path, data: bytes) -> bool:
    """``data`` as a new 0600 file at ``path`` (never through a symlink, never over something new)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except OSError as exc:
        log.warning("exec_output_not_restored", path=str(path), error=str(exc))
        return False
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fd, FILE_MODE)
        fh.write(data)
    return True
