"""The database file must stay the one the daemon opened: deleted or replaced while it runs, the daemon stops.

SQLite keeps writing into a file it holds open even after the path stops naming it: a deleted database
keeps taking messages into a file nobody will read again, and a restart starts from an empty one. So the
daemon notes the file's identity (device, inode) when it opens it and compares it on every status tick.
Only the main file counts: the -wal and -shm files come and go with checkpoints. A lost database stops the
daemon (exit 78, not restarted) and leaves a marker in the data directory, so the next start tells the owner
what happened and `teleton doctor` names it meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

from teleton.storage.private_files import write_private

log = structlog.get_logger(__name__)

MARKER = "database-lost.json"


@dataclass(frozen=True)
class FileIdentity:
    device: int
    inode: int
    by: str = "the daemon"  # or `teleton chat`


def identity_of(path: Path) -> FileIdentity | None:
    """The identity of the file ``path`` names now (None: no file there, or its folder is gone)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return FileIdentity(st.st_dev, st.st_ino)


@dataclass
class LostDatabase:
    """What the marker keeps: when the loss was found, the path, how, and the identity of the file lost."""

    at: float
    path: str
    how: str  # "deleted" | "replaced"
    device: int
    inode: int
    by: str = "the daemon"  # or `teleton chat`

    def line(self) -> str:
        return (
            f"the database {self.path} was {self.how} while {self.by} ran; stopping (exit 78) so nothing more "
            "is written into a file no one will read; restore the last backup with `teleton restore ARCHIVE` or "
            "start fresh"
        )

    def owner_notice(self) -> str:
        stopped = time.strftime("%H:%M", time.localtime(self.at))
        return (
            f"Last run stopped at {stopped} because the database file was deleted or replaced while I ran; "
            "messages after that were not archived."
        )


@dataclass
class DatabaseWatch:
    """``await DatabaseWatch.opened(path)`` right after opening; ``await watch.check()`` on each tick."""

    path: Path
    identity: FileIdentity | None
    by: str = "the daemon"

    @classmethod
    async def opened(cls, path: Path, by: str = "the daemon") -> DatabaseWatch:
        return cls(path, await asyncio.to_thread(identity_of, path), by)

    async def check(self) -> LostDatabase | None:
        """None while the path still names the opened file; else what was lost."""
        if self.identity is None:
            return None
        try:
            now = await asyncio.to_thread(identity_of, self.path)
        except OSError:  # cannot look (a permission changed): no proof the file is gone, so no stop
            return None
        if now == self.identity:
            return None
        how = "deleted" if now is None else "replaced"
        return LostDatabase(time.time(), str(self.path), how, self.identity.device, self.identity.inode, self.by)


def write_marker(data_dir: Path, lost: LostDatabase) -> None:
    write_private(data_dir / MARKER, json.dumps(asdict(lost)))


def read_marker(data_dir: Path) -> LostDatabase | None:
    """The marker of a database lost in an earlier run (None: none, or one no one can read)."""
    try:
        return LostDatabase(**json.loads((data_dir / MARKER).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def clear_marker(data_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (data_dir / MARKER).unlink()


async def leave_marker(data_dir: Path, lost: LostDatabase) -> None:
    """Note the loss for the next start (the daemon's or `teleton chat`'s) and doctor; a data directory that
    went with the file takes no marker, and the stop and its line still happen."""
    try:
        await asyncio.to_thread(write_marker, data_dir, lost)
    except OSError as exc:
        log.warning("database_lost_marker_failed", error=str(exc))


async def tell_last_loss(data_dir: Path, tell: Callable[[str], Awaitable[None]]) -> None:
    """Tell the owner once that the last run stopped on a lost database; the marker stays if telling fails."""
    lost = await asyncio.to_thread(read_marker, data_dir)
    if lost is None:
        return
    log.warning("database_lost_last_run", path=lost.path, how=lost.how, at=lost.at)
    try:
        await tell(lost.owner_notice())
    except Exception as exc:
        log.warning("owner_not_told", error=repr(exc))
        return
    await asyncio.to_thread(clear_marker, data_dir)
