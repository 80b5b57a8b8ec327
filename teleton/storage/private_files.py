"""Files and folders only their owner may read: 0600 / 0700 whatever the process umask is.

Everything the daemon writes that can hold private data — the workspace and its files, daily logs,
learnings, downloads, the status file — is created through these helpers. ``os.open`` with mode 0600 can
only lose bits to the umask, and the explicit ``fchmod`` also narrows a file that already existed wider.
Sync on purpose: callers run them in a worker thread.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import BinaryIO, TextIO, cast

import structlog

log = structlog.get_logger(__name__)

FILE_MODE = 0o600
DIR_MODE = 0o700


def _create_missing(directory: Path, stop_at: Path | None = None) -> None:
    """Create ``directory`` and its missing parents (up to ``stop_at``) as 0700; folders that exist stay."""
    missing = []
    current = directory
    while not current.exists() and current != current.parent and current != stop_at:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass


def private_dir(path: Path, *, stop_at: Path | None = None) -> Path:
    """Create ``path`` and any missing parents (up to ``stop_at``) as 0700; narrow ``path`` if it exists."""
    path = Path(path)
    _create_missing(path, stop_at)
    os.chmod(path, DIR_MODE)
    return path


def private_parents(path: Path) -> None:
    """Create the missing folders above ``path`` as 0700; folders that exist are left as they are (a
    database configured into a shared folder does not make that folder private)."""
    _create_missing(Path(path).parent)


def private_data_dir(path: Path) -> Path:
    """The data directory, created 0700, or narrowed to 0700 when it exists wider (the README's
    ``python3 -m venv ~/.teleton/venv`` creates it 0755 before Teleton first runs), said in one info line: it
    is what README's install does, not something for a new user to worry about.
    A folder this user may not chmod (someone else's) is said and left: what fails later names its cause."""
    path = Path(path).expanduser()
    private_parents(path / "x")
    try:
        old = path.stat().st_mode & 0o777
        if old & ~DIR_MODE:
            os.chmod(path, DIR_MODE)
            log.info("data_dir_narrowed", path=str(path), old_mode=f"{old:o}", mode=f"{DIR_MODE:o}")
    except OSError as exc:
        if exc.errno != errno.EROFS:  # a read-only disk is not narrowed, and the first write says so
            log.warning("data_dir_not_private", path=str(path), error=exc.strerror or str(exc))
    return path


def touch_private(path: Path) -> Path:
    """Create ``path`` empty as 0600, or narrow it to 0600, keeping what it holds: for a file another library
    opens itself (prompt_toolkit's history, a log handler), which would create it with the umask's mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path


def open_private(path: Path, mode: str = "w", *, stop_at: Path | None = None) -> TextIO:
    """``open(path, mode)`` for text, creating the file 0600 (and its folder 0700)."""
    if mode not in ("w", "a"):
        raise ValueError(f"mode must be 'w' or 'a', not {mode!r}")
    path = Path(path)
    if not path.parent.exists():
        private_dir(path.parent, stop_at=stop_at)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(path, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        return cast(TextIO, os.fdopen(fd, mode, encoding="utf-8"))
    except BaseException:
        os.close(fd)
        raise


def write_private(path: Path, text: str, *, append: bool = False, stop_at: Path | None = None) -> None:
    with open_private(path, "a" if append else "w", stop_at=stop_at) as fh:
        fh.write(text)


def write_private_bytes(path: Path, data: bytes, *, stop_at: Path | None = None) -> None:
    """``data`` as the whole of ``path``, created 0600 (and its folder 0700)."""
    path = Path(path)
    if not path.parent.exists():
        private_dir(path.parent, stop_at=stop_at)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fd, FILE_MODE)
        fh.write(data)


def create_private(path: Path) -> BinaryIO:
    """A new file at ``path`` (an existing one is ``FileExistsError``, never overwritten), open for binary
    writing, 0600 from the start (and its folder 0700)."""
    path = Path(path)
    if not path.parent.exists():
        private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # whatever the umask took away
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def make_private(path: Path) -> None:
    """Narrow a file someone else created (a download) to 0600."""
    os.chmod(path, FILE_MODE)


class Unreadable(ValueError):
    """A workspace file that is not read as text; the message says why."""


def read_confined(root: Path, path: Path, *, limit: int | None = None) -> tuple[str, str]:
    """(text, real path relative to ``root``) of a text file that really lies inside ``root``.

    Symlinks are followed first, so a link pointing out of the workspace is refused, and a link inside it
    is reported by its target (whose label is what counts). A binary or non-UTF-8 file is ``Unreadable``.
    """
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(real_root):
        raise Unreadable("it leads outside the workspace")
    with real.open("rb") as fh:
        data = fh.read() if limit is None else fh.read(limit)
    if b"\x00" in data[:8192]:
        raise Unreadable("binary file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if limit is None or exc.start < len(data) - 4:  # a cut at the limit may split one character
            raise Unreadable("not UTF-8 text") from exc
        text = data[: exc.start].decode("utf-8")
    return text, real.relative_to(real_root).as_posix()
