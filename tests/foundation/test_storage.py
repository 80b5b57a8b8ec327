"""The store: migrations, vectors, keyword-only fallback, concurrency, file modes, backup."""

from __future__ import annotations

import asyncio
import struct
import threading
from pathlib import Path

import pytest
import sqlite_vec
import structlog

from teleton.storage import Database, connect
from teleton.storage import schema as schema_mod
from teleton.storage.sqlite_driver import pick_driver

TABLES = {
    "meta", "knowledge", "knowledge_fts", "sessions", "tg_messages", "tg_messages_fts", "tg_chats", "tg_users",
    "embedding_cache", "exec_audit", "tool_index", "tool_index_fts", "tool_config", "tasks",
    "task_dependencies", "facts", "facts_fts",
}  # fmt: skip
VEC_TABLES = {"knowledge_vec", "tool_index_vec", "facts_vec"}


def _tables(conn) -> set[str]:
    return {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}


def _vec(*values: float) -> bytes:
    return struct.pack(f"{len(values)}f", *values)


async def test_new_database_has_full_schema(db: Database) -> None:
    tables = await db.read(_tables)
    assert TABLES | VEC_TABLES <= tables
    version = await db.fetchone("select value from meta where key='schema_version'")
    assert int(version[0]) == schema_mod.SCHEMA_VERSION
    pragmas = await db.read(
        lambda c: (c.execute("pragma journal_mode").fetchone()[0], c.execute("pragma foreign_keys").fetchone()[0])
    )
    assert pragmas == ("wal", 1)
    assert db.vectors


async def test_upgrade_from_every_earlier_version(tmp_path: Path) -> None:
    """A database left at each earlier schema version opens and ends at the current one, data intact."""
    driver = pick_driver()
    for start in range(schema_mod.SCHEMA_VERSION):
        path = tmp_path / f"v{start}.db"
        conn = connect(path, driver)
        schema_mod.migrate(conn, schema_mod.MIGRATIONS[:start])
        assert schema_mod.current_version(conn) == start
        conn.close()
        db = await Database.open(path)
        assert (db.info.schema_from, db.info.schema_to) == (start, schema_mod.SCHEMA_VERSION)
        await db.execute("insert into tg_chats(id, type, title, updated_at) values (1, 'dm', 'x', 0)")
        await db.close()


def test_synthetic_migration_step_upgrades_and_rolls_back(tmp_path: Path) -> None:
    conn = connect(tmp_path / "m.db", pick_driver())
    schema_mod.migrate(conn)
    conn.execute("insert into tg_chats(id, type, title, updated_at) values (7, 'group', 'Trip', 0)")

    def add_column(c) -> None:
        c.execute("alter table tg_chats add column color text not null default 'blue'")

    v = schema_mod.SCHEMA_VERSION
    assert schema_mod.migrate(conn, [*schema_mod.MIGRATIONS, add_column]) == (v, v + 1)
    assert conn.execute("select title, color from tg_chats where id = 7").fetchone()[:] == ("Trip", "blue")
    # Running again is a no-op.
    assert schema_mod.migrate(conn, [*schema_mod.MIGRATIONS, add_column]) == (v + 1, v + 1)

    def broken(c) -> None:
        c.execute("create table half_done(x)")
        raise RuntimeError("step failed")

    with pytest.raises(RuntimeError, match="step failed"):
        schema_mod.migrate(conn, [*schema_mod.MIGRATIONS, add_column, broken])
    assert schema_mod.current_version(conn) == v + 1
    assert "half_done" not in _tables(conn)  # the failed step left nothing behind
    # A database from a newer Teleton is refused, not damaged.
    with pytest.raises(RuntimeError, match="newer than this Teleton supports"):
        schema_mod.migrate(conn, schema_mod.MIGRATIONS)
    conn.close()


async def test_vector_insert_and_knn_round_trip(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "v.db", embedding=("m", 4))

    def fill(c) -> None:
        for label, rowid, vec in [("a", 1, (1, 0, 0, 0)), ("a", 2, (0, 1, 0, 0)), ("b", 3, (0.9, 0.1, 0, 0))]:
            c.execute("insert into knowledge_vec(id, label, embedding) values (?, ?, ?)", (rowid, label, _vec(*vec)))

    await db.write(fill)
    hits = await db.fetchall(
        "select id, distance from knowledge_vec where embedding match ? and k = 2 order by distance",
        (_vec(1, 0, 0, 0),),
    )
    assert [h[0] for h in hits] == [1, 3]
    in_label_b = await db.fetchall(
        "select id from knowledge_vec where embedding match ? and k = 2 and label = 'b'", (_vec(1, 0, 0, 0),)
    )
    assert [h[0] for h in in_label_b] == [3]
    await db.close()


async def test_model_change_drops_vectors_instead_of_mixing(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    db = await Database.open(path, embedding=("model-a", 4))
    await db.execute(
        "insert into knowledge(source, text, hash, embedded, created_at, updated_at) "
        "values ('memory', 'a note', 'h', 1, 0, 0)"
    )
    await db.write(
        lambda c: c.execute(
            "insert into knowledge_vec(id, label, embedding) values (1, 'owner', ?)", (_vec(1, 0, 0, 0),)
        )
    )
    await db.close()
    db = await Database.open(path, embedding=("model-b", 8))
    assert db.info.vectors_reset
    assert (await db.fetchone("select count(*) from knowledge_vec"))[0] == 0
    assert (await db.fetchone("select embedded from knowledge"))[0] == 0  # queued for re-embedding
    await db.execute("insert into knowledge_vec(id, label, embedding) values (1, 'owner', ?)", (_vec(*[0.5] * 8),))
    await db.close()
    db = await Database.open(path, embedding=("model-b", 8))
    assert not db.info.vectors_reset  # same model again: index kept
    assert (await db.fetchone("select count(*) from knowledge_vec"))[0] == 1
    await db.close()


async def test_keyword_only_when_sqlite_vec_cannot_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(conn) -> None:
        raise OSError("vec0.so: cannot open shared object file")

    monkeypatch.setattr(sqlite_vec, "load", refuse)
    with structlog.testing.capture_logs() as logs:
        db = await Database.open(tmp_path / "k.db", embedding=("m", 4))
        await db.fetchall("select 1")
        await db.fetchall("select 2")
    assert not db.vectors
    warnings = [e for e in logs if e["event"] == "vectors_unavailable"]
    assert len(warnings) == 1
    assert not VEC_TABLES & await db.read(_tables)
    await db.execute(
        "insert into knowledge(source, text, hash, created_at, updated_at) "
        "values ('memory', 'the ferry leaves at nine', 'h', 0, 0)"
    )
    hits = await db.fetchall("select rowid from knowledge_fts where knowledge_fts match 'ferries'")
    assert [h[0] for h in hits] == [1]  # porter stemming: 'ferries' finds 'ferry'
    await db.close()


async def test_readers_run_while_a_write_is_in_progress(db: Database) -> None:
    await db.execute("insert into tg_chats(id, type, title, updated_at) values (1, 'dm', 'before', 0)")
    in_transaction, release = threading.Event(), threading.Event()

    def held_write(conn) -> None:
        conn.execute("update tg_chats set title = 'after' where id = 1")
        in_transaction.set()
        assert release.wait(60), "the test never released the write"  # hang guard only

    writer = asyncio.create_task(db.write(held_write))
    try:
        assert await asyncio.to_thread(in_transaction.wait, 60), "the write never started"
        # The write transaction is open on the writer thread and stays open until released: readers that
        # waited for it would never finish (the guard turns that into a failure instead of a hang).
        reads = asyncio.gather(*(db.fetchone("select title from tg_chats where id = 1") for _ in range(6)))
        titles = await asyncio.wait_for(reads, timeout=60)
        assert not writer.done()
        assert {t[0] for t in titles} == {"before"}  # and saw the last committed state
    finally:
        release.set()
    await writer
    assert (await db.fetchone("select title from tg_chats where id = 1"))[0] == "after"


async def test_read_each_runs_once_on_every_reader_with_its_own_connection(db: Database) -> None:
    seen: list[tuple[int, int]] = []
    assert await db.read_each(lambda conn: seen.append((threading.get_ident(), id(conn)))) == 3
    assert len({thread for thread, _ in seen}) == len({conn for _, conn in seen}) == 3
    # Those connections are the ones later reads use: none is opened again.
    later = await asyncio.gather(*(db.read(lambda conn: id(conn)) for _ in range(9)))
    assert set(later) <= {conn for _, conn in seen}

    def fails_on_one(conn) -> None:
        if id(conn) == seen[0][1]:
            raise OSError("disk I/O error")

    with structlog.testing.capture_logs() as logs:
        assert await db.read_each(fails_on_one) == 2
    assert [e["event"] for e in logs] == ["reader_call_failed"]


async def test_failed_write_rolls_back(db: Database) -> None:
    def half(conn) -> None:
        conn.execute("insert into tg_chats(id, type, title, updated_at) values (5, 'dm', 'x', 0)")
        raise ValueError("boom")

    with pytest.raises(ValueError):
        await db.write(half)
    assert (await db.fetchone("select count(*) from tg_chats"))[0] == 0


async def test_no_sql_on_the_event_loop_thread(db: Database) -> None:
    import threading

    loop_thread = threading.get_ident()
    seen = await db.read(lambda c: threading.get_ident())
    written = await db.write(lambda c: threading.get_ident())
    assert loop_thread not in (seen, written)


async def test_the_database_is_private(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "p.db")
    await db.execute("insert into tg_chats(id, type, title, updated_at) values (1, 'dm', 'kept', 0)")
    await db.close()
    assert (tmp_path / "p.db").stat().st_mode & 0o777 == 0o600  # backups: tests/backup


async def test_a_failed_commit_rolls_back_and_the_writer_keeps_serving(tmp_path: Path) -> None:
    db = await Database.open(tmp_path / "c.db")
    now = 1.0

    def dangling(conn) -> None:
        # A deferred foreign key is checked at COMMIT: the commit itself fails, as it does on a full disk.
        conn.execute("pragma defer_foreign_keys = on")
        conn.execute(
            "insert into tasks(description, kind, created_at, updated_at) values ('kept?', 'agent', ?, ?)",
            (now, now),
        )
        conn.execute("insert into task_dependencies(task_id, depends_on) values (last_insert_rowid(), 999)")

    with pytest.raises(Exception, match="FOREIGN KEY"):
        await db.write(dangling)
    # Nothing of the failed transaction stayed, and the next writes work (no "transaction within a
    # transaction" from a COMMIT that was never rolled back).
    assert (await db.fetchone("select count(*) from tasks"))[0] == 0
    await db.execute("insert into tg_chats(id, type, title, updated_at) values (5, 'dm', 'ok', 0)")
    assert (await db.fetchone("select title from tg_chats where id = 5"))[0] == "ok"
    await db.close()
