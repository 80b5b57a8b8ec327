"""Applying the schema's forward-only migrations (the steps are in ``teleton.storage.migrations``).

``meta.schema_version`` records the last step applied; opening a database applies the missing ones in order,
each in its own transaction, so a database made by any earlier release is upgraded at start. Vector tables are
not part of the migrations: their dimension depends on the configured embedding model (see ``vector_tables``).
"""

from __future__ import annotations

from teleton.storage.migrations import MIGRATIONS, Migration
from teleton.storage.sqlite_driver import Connection

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SESSION_ARCHIVED", "Migration", "current_version", "migrate"]

SCHEMA_VERSION = len(MIGRATIONS)
# sessions.messages_json holds Messages API messages; a person's message also names its archive row under this
# key, [chat id, message id, date] (Teleton's own: ``llm.types.sendable`` strips it from every request). What a
# transcript's fact was drawn from (``agent.distiller``), and what /forget of that message scrubs by id.
SESSION_ARCHIVED = "_archived"


def current_version(conn: Connection) -> int:
    exists = conn.execute("select 1 from sqlite_master where type='table' and name='meta'").fetchone()
    if not exists:
        return 0
    row = conn.execute("select value from meta where key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: Connection, migrations: list[Migration] | None = None) -> tuple[int, int]:
    """Apply missing migrations, each in its own transaction. Return (from_version, to_version)."""
    steps = MIGRATIONS if migrations is None else migrations
    start = current_version(conn)
    if start > len(steps):
        raise RuntimeError(
            f"database schema version {start} is newer than this Teleton supports ({len(steps)}); "
            "upgrade Teleton or restore a backup"
        )
    for version in range(start, len(steps)):
        conn.execute("begin immediate")
        try:
            steps[version](conn)
            conn.execute(
                "insert into meta(key, value) values ('schema_version', ?) "
                "on conflict(key) do update set value = excluded.value",
                (str(version + 1),),
            )
            conn.execute("commit")
        except BaseException:
            conn.execute("rollback")
            raise
    return start, len(steps)
