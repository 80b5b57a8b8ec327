"""What the daemon knows about its own health: the database it starts on, and the status it reports.

``open_checked``: a database that cannot be opened or fails ``PRAGMA quick_check`` stops the start with one
line naming the cause and its fix (``storage.failures``: restoring the last ``teleton backup`` only when SQLite
says the file is damaged; a read-only disk, a lock or a full disk have their own), instead of a daemon that
says ready and then answers nobody. The check reads every page (10 s for 1M messages), so after a clean stop
(a marker beside the database, ``take_clean_stop``) it runs once the daemon is ready, and damage found then
stops the daemon with the same line; after a crash, or on a first start, it runs before. ``gather_status``: per
loop health, queue depths, the last error of each kind, quarantined items, messages still owed an answer and
model calls retrying now, for ``teleton status``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import structlog

from teleton.memory.feed import archive as fa
from teleton.memory.feed import reads
from teleton.storage import quarantine
from teleton.storage.database import Database, connect
from teleton.storage.failures import cause_of, problems_line
from teleton.storage.private_files import write_private
from teleton.storage.sqlite_driver import pick_driver

log = structlog.get_logger(__name__)

RESTORE = "restore the last backup with `teleton restore ARCHIVE` (stop the daemon first; never copy a file over it)"


class StartupError(RuntimeError):
    """The daemon cannot start; the message is one line that says why and what to do."""


CLEAN_STOP = ".clean-stop"  # suffix of the marker a clean stop leaves beside the database


def take_clean_stop(path: Path) -> bool:
    """Whether the last stop closed the database ``path`` cleanly and it is still that file (a database
    deleted, replaced or written since is checked before ready); the marker goes, so a crash from now on
    leaves none."""
    marker = path.with_name(path.name + CLEAN_STOP)
    try:
        said = marker.read_text()
        marker.unlink()
    except OSError:  # none (a crash, a first start), or unreadable
        return False
    return bool(said) and said == _identity(path)


def mark_clean_stop(path: Path) -> None:
    write_private(path.with_name(path.name + CLEAN_STOP), _identity(path))


def _identity(path: Path) -> str:
    """The file as the clean stop left it: device, inode, size and modification time ("" when it is gone)."""
    try:
        st = path.stat()
    except OSError:
        return ""
    return json.dumps([st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns])


def damaged_line(path: Path, problems: list[str]) -> str:
    return f"the database {path} is damaged ({problems_line(problems)}); {RESTORE}"


async def open_checked(path: Path, embedding: tuple[str, int] | None, *, check: bool = True) -> Database:
    """Open the database; ``check``: run ``quick_check`` now (else the caller runs it after start)."""
    try:
        db = await Database.open(path, embedding=embedding)
    except Exception as exc:  # not a database, a read-only or full disk, a lock: the cause names which
        cause = cause_of(exc, path)
        if cause is None:
            raise StartupError(f"the database {path} cannot be opened ({exc})") from exc
        raise StartupError(f"the database cannot be opened: {cause.line()}") from exc
    if not check:
        return db
    try:
        problems = await quick_check(db)
    except Exception as exc:  # the check could not run (a lock, an I/O error): that is the cause, not damage
        await db.close()
        cause = cause_of(exc, path)
        if cause is None:
            raise
        raise StartupError(f"the database cannot be checked: {cause.line()}") from exc
    if problems:
        await db.close()
        raise StartupError(damaged_line(path, problems))
    return db


async def quick_check(db: Database) -> list[str]:
    """The problems ``PRAGMA quick_check`` reports (empty: sound); SQLite saying the file is corrupt is one
    of them, any other failure to check is raised. It runs on a connection opened for it: on a connection
    that has read an FTS5 table before, SQLite's check of its index (3.50) reports "malformed inverted index"
    once another connection has committed to it, though the file is sound, and the daemon would stop itself
    as damaged beside its own writes."""

    def check() -> list[str]:
        conn = connect(db.path, pick_driver(), vectors=False, readonly=True)
        try:
            return [str(r[0]) for r in conn.execute("pragma quick_check").fetchall()]
        finally:
            conn.close()

    try:
        found = await asyncio.to_thread(check)
    except Exception as exc:
        cause = cause_of(exc)
        if cause is not None and cause.kind == "damaged":
            return [str(exc)]
        raise
    log.info("database_checked", sound=found == ["ok"])
    return [] if found == ["ok"] else found


async def gather_status(daemon: Any) -> None:
    status, db = daemon.status, daemon.db
    if db is not None:

        def _counts(conn: Any) -> tuple[int, dict[str, int], dict[str, int]]:
            return reads.newest_row(conn), fa.answer_counts(conn), quarantine.counts(conn)

        status.archived_messages, status.messages, status.quarantined = await db.read(_counts)
    queues: dict[str, int] = {}
    if daemon.dispatcher is not None:
        status.queue_depth = queues["turns"] = daemon.dispatcher.queue_depth()
    if daemon.gateway is not None:
        queues["archive"] = daemon.gateway.batcher.depth
        if daemon.gateway.batcher.failing_since is not None:
            daemon.supervisor.report("storage", daemon.gateway.batcher.last_error or "archive writes failing")
    status.queues = queues
    if daemon.stack is not None:
        status.turns = daemon.stack.agent.turns
        status.model_retrying = daemon.stack.llm.watch.line()
    if daemon.mcp is not None:
        status.mcp = daemon.mcp.status()
    status.loops = {name: h.as_dict() for name, h in daemon.supervisor.loops.items()}
    status.errors = {kind: [error, at] for kind, (error, at) in daemon.supervisor.errors.items()}
    status.details["loop_lag_p99_ms"] = round(daemon.lag.p99_ms(), 1)
    status.details["loop_lag_max_ms"] = round(daemon.lag.worst_s * 1000, 1)
    await asyncio.sleep(0)
