"""Why a file or database operation failed, named from the error itself: one cause, the path, and its fix.

Every place that reports a storage failure to a person (the CLI's one error line, ``teleton doctor``, the
daemon's start) asks ``cause_of`` here, so one error gets one diagnosis everywhere. "Damaged" is said only
when SQLite itself says the file is not a database or is corrupt: a healthy database in a read-only or
unwritable folder must never be called damaged, because the fix for damage (restoring a backup over it)
would destroy it. When SQLite's words do not tell ("unable to open database file", "attempt to write a
readonly database", "disk I/O error"), the path is looked at: a missing folder, a read-only filesystem, a
folder this user may not write, a full disk.
"""

from __future__ import annotations

import errno
import getpass
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from teleton.storage.sqlite_driver import pick_driver

Kind = Literal["read_only", "permission", "disk_full", "missing", "damaged", "locked", "io"]

RESTORE = "stop Teleton, then restore the last backup with `teleton restore ARCHIVE`, or move it away to start anew"

# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_KINDS: dict[int, Kind] = {
    3: "permission",
    5: "locked",
    6: "locked",
    11: "damaged",
    13: "disk_full",
    26: "damaged",
}
_SQLITE_PROBED = {8, 10, 14}  # READONLY, IOERR, CANTOPEN: the path tells which
_WORDS: tuple[tuple[str, Kind | None], ...] = (
    ("file is not a database", "damaged"),
    ("database disk image is malformed", "damaged"),
    ("database or disk is full", "disk_full"),
    ("database is locked", "locked"),
    ("database table is locked", "locked"),
    ("attempt to write a readonly database", None),
    ("unable to open database file", None),
    ("disk i/o error", None),
)
_ERRNO_KINDS: dict[int, Kind] = {
    errno.EROFS: "read_only",
    errno.EACCES: "permission",
    errno.EPERM: "permission",
    errno.ENOSPC: "disk_full",
    errno.EDQUOT: "disk_full",
    errno.ENOENT: "missing",
    errno.ENOTDIR: "missing",
    errno.EIO: "io",
}


class StorageError(Exception):
    """A storage operation failed for a named cause; the message is its one line, the original error its
    ``__cause__``."""

    def __init__(self, cause: Cause) -> None:
        super().__init__(cause.line())
        self.cause = cause


@dataclass(frozen=True)
class Cause:
    kind: Kind
    path: Path | None
    reason: str  # the system's own words: "Read-only file system", "database is locked"

    @property
    def what(self) -> str:
        said = f" ({self.reason})"
        if self.kind == "read_only":
            return "read-only filesystem" + ("" if self.reason == os.strerror(errno.EROFS) else said)
        if self.kind == "permission":
            return f"permission denied for user {_user()}" + ("" if self.reason == os.strerror(errno.EACCES) else said)
        if self.kind == "disk_full":
            return "the disk is full" + ("" if self.reason == os.strerror(errno.ENOSPC) else said)
        if self.kind == "missing":
            gap = _first_missing(self.path) if self.path is not None else None
            return self.reason + (f" (the folder {gap} does not exist)" if gap and gap != self.path else "")
        if self.kind == "damaged":
            return f"the database is damaged or not a Teleton database{said}"
        if self.kind == "locked":
            return f"locked by another process{said}"
        return f"the disk reported an I/O error{said}"

    @property
    def fix(self) -> str:
        path = self.path
        shown = str(path) if path is not None else "the file"
        if self.kind == "read_only":
            mount = mount_point(path) if path is not None else None
            where = f" ({mount} is mounted read-only)" if mount is not None else ""
            return f"remount the filesystem read-write{where}, or use a folder on a writable disk"
        if self.kind == "permission":
            return _permission_fix(path)
        if self.kind == "disk_full":
            return f"free some space on that disk (`df -h {nearest_existing(path) or '.'}`), then run it again"
        if self.kind == "missing":
            gap = _first_missing(path) if path is not None else None
            create = f": `mkdir -p {gap}`" if gap is not None and gap != path else ""
            return f"check the path in the config, or create the folder{create}"
        if self.kind == "damaged":
            return RESTORE
        if self.kind == "locked":
            return (
                f"another program holds {shown} open (a second Teleton, a `sqlite3` shell, a backup tool): "
                f"close it and run again; `fuser -v {shown}` names it"
            )
        return "check the disk (`dmesg` names the device), then run `teleton doctor`"

    def line(self) -> str:
        where = f"{self.path}: " if self.path is not None else ""
        return f"{where}{self.what}: {self.fix}"


def cause_of(exc: BaseException, path: Path | str | None = None) -> Cause | None:
    """The cause of ``exc`` (or of an error it was raised from), or None when it is not a storage failure.
    ``path``: the file the operation was on, when the error does not carry it (SQLite's never do)."""
    given = Path(path) if path is not None else None
    for error in _chain(exc):
        if isinstance(error, StorageError):
            return error.cause
        if isinstance(error, OSError) and error.errno in _ERRNO_KINDS:
            where = Path(error.filename) if error.filename else given
            kind = _ERRNO_KINDS[error.errno]
            if kind == "missing" and where is not None and where.exists():
                continue  # not a missing folder after all (a name inside the file, a race): no claim
            return Cause(kind, where, error.strerror or str(error))
        if isinstance(error, _sqlite_errors()):
            named = _sqlite_kind(error, given)
            if named is not None:
                return Cause(named, given, str(error))
    return None


def probe(path: Path) -> Kind | None:
    """What about ``path`` stops a write to it: a missing folder, a read-only filesystem, no permission,
    a full disk; None when none of these."""
    path = Path(path)
    if not path.parent.is_dir():
        return "missing"
    existing = path if path.exists() else path.parent
    try:
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            return "read_only"
    except OSError:
        return None
    if not os.access(path.parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.R_OK | os.W_OK)):
        return "permission"
    if shutil.disk_usage(existing).free == 0:
        return "disk_full"
    return None


def mount_point(path: Path) -> Path | None:
    """The mount point ``path`` lies on: the nearest folder the kernel lists as one (a bind mount included,
    which shares its device with the filesystem it shows), else the highest folder on the same device."""
    current = nearest_existing(path)
    if current is None:
        return None
    real = Path(os.path.realpath(current))
    points = _mount_points()
    for candidate in (real, *real.parents):
        if str(candidate) in points:
            return candidate
    device = real.stat().st_dev
    while real != real.parent and real.parent.stat().st_dev == device:
        real = real.parent
    return real


def _mount_points() -> set[str]:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            # The fifth field; spaces and tabs in it are written as octal escapes (\040).
            return {re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in fh}
    except (OSError, IndexError):  # not Linux
        return set()


def _sqlite_kind(error: BaseException, path: Path | None) -> Kind | None:
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _SQLITE_KINDS:
        return _SQLITE_KINDS[code & 0xFF]
    text = str(error).lower()
    probed = isinstance(code, int) and code & 0xFF in _SQLITE_PROBED
    for words, kind in _WORDS:
        if words in text:
            if kind is not None:
                return kind
            probed = True
    if not probed:
        return None
    found = probe(path) if path is not None else None
    if found is not None:
        return found
    if "readonly" in text:
        return "permission"  # the file itself is read-only to SQLite (its mode, or opened read-only)
    return "io" if "i/o" in text else None


def _permission_fix(path: Path | None) -> str:
    target = _denied(path) if path is not None else None
    if target is None:
        return f"give {_user()} write access to the data directory, or set storage.data_dir to a folder it can write"
    try:
        owner = _owner(target)
    except OSError:
        owner = None
    if owner is not None and owner != _user():
        run_as = f"run Teleton as {owner} (`sudo -u {owner} teleton …`)"
        return f"it belongs to {owner}: {run_as}, or `sudo chown -R {_user()} {target}`"
    return f"give yourself access: `chmod {'700' if target.is_dir() else '600'} {target}`"


def _denied(path: Path) -> Path | None:
    """What refuses this user: ``path`` itself when it exists and cannot be read and written, else the folder
    it is (to be) created in."""
    if path.exists() and not os.access(path, os.R_OK | os.W_OK | (os.X_OK if path.is_dir() else 0)):
        return path
    return nearest_existing(path.parent)


def _owner(path: Path) -> str:
    try:
        return path.owner()
    except KeyError:  # no name for that uid
        return str(path.stat().st_uid)


def _first_missing(path: Path) -> Path | None:
    """The highest folder of ``path`` that does not exist (``path`` itself when only it is missing)."""
    gap = None
    current = path
    while not current.exists() and current != current.parent:
        gap, current = current, current.parent
    return gap


def nearest_existing(path: Path | None) -> Path | None:
    """``path``, or its nearest folder that exists (where something not yet created would be made)."""
    current = path
    while current is not None and not current.exists():
        if current == current.parent:
            return None
        current = current.parent
    return current


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no name for this uid (a container's numeric user)
        return str(os.getuid())


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _sqlite_errors() -> tuple[type[BaseException], ...]:
    return (sqlite3.Error, pick_driver().module.Error)


def problems_line(problems: list[str]) -> str:
    """What ``quick_check``/``integrity_check`` found, in one line: the first problem and how many more (SQLite
    may return a hundred lines, or one row holding them all)."""
    lines = [line for problem in problems for line in str(problem).splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("*** in database")] or lines
    if not lines:
        return "unknown damage"
    more = f"; {len(lines) - 1} more problems" if len(lines) > 1 else ""
    return lines[0].strip() + more
