"""Which SQLite the store runs on, and whether sqlite-vec loads into it.

The stdlib ``sqlite3`` of many Python builds (pyenv, python.org macOS installers) is compiled without
extension loading, so sqlite-vec cannot load there. ``sqlean.py`` ships a current SQLite with FTS5 and
extension loading for Linux, macOS and Windows, and is a drop-in DB-API module; it is the default. The
stdlib module is used only when it can load extensions and sqlean is missing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from types import ModuleType
from typing import Any

Connection = Any  # a DB-API connection of whichever module was chosen


@dataclass(frozen=True)
class Driver:
    module: ModuleType
    name: str

    @property
    def sqlite_version(self) -> str:
        return str(self.module.sqlite_version)


def pick_driver() -> Driver:
    try:
        import sqlean  # optional: the stdlib sqlite3 when it is missing

        return Driver(sqlean, "sqlean.py")
    except ImportError:
        return Driver(sqlite3, "stdlib sqlite3")


def load_sqlite_vec(conn: Connection) -> str | None:
    """Load sqlite-vec into ``conn``; return its version, or None when it cannot be loaded."""
    try:
        import sqlite_vec  # optional: keyword-only search when it is missing

        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        return str(conn.execute("select vec_version()").fetchone()[0])
    except Exception:
        return None


def has_fts5(conn: Connection) -> bool:
    try:
        conn.execute("create virtual table temp._fts5_probe using fts5(x)")
        conn.execute("drop table temp._fts5_probe")
        return True
    except Exception:
        return False
