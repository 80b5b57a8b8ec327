"""What the schema steps share: running a script inside the step's transaction, and the keyword (FTS5) index
of a table with the triggers that keep it in step with the table's rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from teleton.storage.sqlite_driver import Connection

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
# Longest trigger header kept on one line; a longer one puts its `when` on the next (as the first steps did).
_HEADER_CHARS = 100


def run_script(conn: Connection, script: str) -> None:
    """Run a multi-statement script inside the caller's transaction (``executescript`` would commit)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            conn.execute(pending)
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement: {pending.strip()[:80]}")


def fts_table(table: str, columns: Sequence[str]) -> str:
    """``<table>_fts``: an external-content FTS5 index of ``columns`` of ``table`` (rowid = ``table.id``)."""
    return f"""
create virtual table if not exists {table}_fts using fts5(
    {", ".join(columns)}, content='{table}', content_rowid='id', tokenize='{FTS_TOKENIZER}'
);
"""


def fts_triggers(table: str, columns: Sequence[str], *, indexed: str | None = None) -> str:
    """The after insert / delete / update triggers ``<table>_ai``, ``_ad``, ``_au`` that keep ``<table>_fts``
    in step. ``indexed``: which rows are in the index, a condition on ``{row}`` (``new`` or ``old``); all rows
    when None. ``_au`` then acts on rows indexed before and after; a row leaving the index needs its own trigger."""
    fts, names = f"{table}_fts", ", ".join(columns)
    new, old = (", ".join(f"{row}.{c}" for c in columns) for row in ("new", "old"))
    add = f"insert into {fts}(rowid, {names}) values (new.id, {new});"
    remove = f"insert into {fts}({fts}, rowid, {names})\n        values ('delete', old.id, {old});"

    def header(name: str, event: str, *rows: str) -> str:
        line = f"create trigger if not exists {table}_{name} after {event} on {table}"
        if indexed is None:
            return f"{line} begin"
        when = "when " + " and ".join(indexed.format(row=row) for row in rows)
        return f"{line} {when} begin" if len(line) + len(when) < _HEADER_CHARS else f"{line}\n    {when} begin"

    return f"""
{header("ai", "insert", "new")}
    {add}
end;
{header("ad", "delete", "old")}
    {remove}
end;
{header("au", f"update of {names}", "old", "new")}
    {remove}
    {add}
end;
"""


def fts_index(table: str, columns: Sequence[str]) -> str:
    """The FTS5 index of ``columns`` of ``table`` and its three triggers (``fts_table`` + ``fts_triggers``)."""
    return fts_table(table, columns) + fts_triggers(table, columns)
