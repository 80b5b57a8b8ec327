"""What a failed command says: one line naming what went wrong and the fix, never a traceback.

Config mistakes are handled where the config is read (exit 2); this covers what the machine does to a
command — a folder it cannot write, a full disk, a damaged database, missing model files (exit 1).
"""

from __future__ import annotations

import sqlite3

from teleton.memory.embeddings.model_files import DEFAULT_MODEL_ID, install_fix
from teleton.providers.extras import MissingExtra
from teleton.providers.pinned_files import ModelFilesError
from teleton.storage.failures import cause_of
from teleton.storage.sqlite_driver import pick_driver


def explain(exc: BaseException) -> str | None:
    """The one line for ``exc``, or None when it is a bug (the traceback is then the useful thing)."""
    if isinstance(exc, MissingExtra):  # the line names the extra and its command already
        return str(exc)
    if isinstance(exc, ModelFilesError):
        return (
            f"embedding model: {exc} (fix: point embedding.model_path at a complete model folder; for the "
            f"default model: {install_fix(DEFAULT_MODEL_ID)})"
        )
    cause = cause_of(exc)  # the one diagnosis of OS and SQLite errors (storage.failures), with the path
    if cause is not None:
        return cause.line()
    if isinstance(exc, _database_errors()):  # a reason SQLite does not name: never called damage
        return f"the database failed ({exc}): `teleton doctor` checks it"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return None


def _database_errors() -> tuple[type[BaseException], ...]:
    return (sqlite3.DatabaseError, pick_driver().module.DatabaseError)
