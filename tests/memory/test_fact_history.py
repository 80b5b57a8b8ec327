"""Facts with time (issue 15): a superseded fact is history — out of every search, kept for "used to"
questions — across a chain of updates, a model change, deletion and the upgrade of an older database."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.store import FactStore
from teleton.memory.reembed import embed_pending_facts
from teleton.storage import Database, connect, schema
from teleton.storage.sqlite_driver import pick_driver


async def _fts_ids(db: Database, word: str) -> set[int]:
    rows = await db.fetchall("select rowid from facts_fts where facts_fts match ?", (word,))
    return {int(r[0]) for r in rows}


async def _vector_ids(db: Database) -> set[int]:
    return {int(r[0]) for r in await db.fetchall("select id from facts_vec")}


async def _fts_consistent(db: Database) -> None:
    await db.write(lambda conn: conn.execute("insert into facts_fts(facts_fts) values ('integrity-check')"))


async def test_a_chain_of_updates_leaves_one_current_fact_and_the_rest_as_history(
    db: Database, embedder: LocalEmbedder
) -> None:
    store = FactStore(db, embedder)
    cities = ("Lisbon", "Porto", "Braga")
    saved = [await store.save(Fact(f"Ana lives in {c}", category="place", key="home_city", subject="owner"))
             for c in cities]  # fmt: skip
    assert [s.action for s in saved] == ["inserted", "superseded", "superseded"]
    assert saved[2].replaced == saved[1].id and saved[1].replaced == saved[0].id

    found = await store.retrieve("where does Ana live? which city", ["owner"], history=True)
    assert [f.value for f in found.facts] == ["Ana lives in Braga"]
    assert [f.value for f in found.history] == ["Ana lives in Porto", "Ana lives in Lisbon"]  # newest first
    assert all(f.valid_until is not None and not f.current for f in found.history)
    assert "no longer true since" in found.history[0].line()
    recalled = [f.value for f in await store.recall("Lisbon Porto", ["owner"])]  # old values find no old fact
    assert not any("Lisbon" in v or "Porto" in v for v in recalled)
    assert await _fts_ids(db, "Lisbon OR Porto OR Braga") == {saved[2].id}
    assert await _vector_ids(db) == {saved[2].id}
    assert await store.count(["owner"]) == 1 and [f.value for f in await store.recent(["owner"])] == [
        "Ana lives in Braga"
    ]
    # The same value said again later is a new current fact, not a clash with its old row.
    back = await store.save(Fact("Ana lives in Lisbon", category="place", key="home_city", subject="owner"))
    assert back.action == "superseded" and back.replaced == saved[2].id
    await _fts_consistent(db)


async def test_a_model_change_never_gives_history_its_vectors_back(tmp_path: Path, embedder: LocalEmbedder) -> None:
    db = await Database.open(tmp_path / "m.db", embedding=(embedder.model_id, embedder.dims))
    store = FactStore(db, embedder)
    old = await store.save(Fact("Rex is a beagle", category="pet", key="dog_breed"))
    new = await store.save(Fact("Rex is a poodle", category="pet", key="dog_breed"))
    saved_vector = (await db.fetchone("select embedding from facts_vec where id = ?", (new.id,)))[0]
    await db.write(lambda conn: conn.execute("update facts set embedded = 0"))  # what a model change does
    await db.write(lambda conn: conn.execute("delete from facts_vec"))
    assert await embed_pending_facts(db, embedder) == 1
    assert await _vector_ids(db) == {new.id}
    # Saving and re-embedding embed the same text (fact_rows.embedding_text): the same vector comes back.
    again = np.frombuffer((await db.fetchone("select embedding from facts_vec where id = ?", (new.id,)))[0], np.float32)
    assert float(again @ np.frombuffer(saved_vector, np.float32)) > 0.9999
    row = await db.fetchone("select embedded from facts where id = ?", (old.id,))
    assert row[0] == 0  # history stays unembedded: nothing searches it by vector
    await db.close()


async def test_deleting_current_and_history_rows_keeps_the_keyword_index_whole(db: Database, embedder) -> None:
    store = FactStore(db, embedder)
    first = await store.save(Fact("The wifi password is tulip77", category="home", key="wifi"))
    second = await store.save(Fact("The wifi password is orchid88", category="home", key="wifi"))
    await db.write(lambda conn: conn.execute("delete from facts where id = ?", (first.id,)))  # history row
    await _fts_consistent(db)
    assert await store.remove(second.id, ["owner"])
    await _fts_consistent(db)
    assert await _fts_ids(db, "wifi") == set() and await store.count() == 0


async def test_a_person_is_only_rewritten_by_themselves_or_the_owner(db: Database, embedder) -> None:
    store = FactStore(db, embedder)
    group = "chat:-100777"
    ann = await store.save(Fact("Ann is vegan", category="diet", key="diet", scope=group, subject="user:1",
                                said_by="user:1"))  # fmt: skip
    by_bob = await store.save(Fact("Ann eats fish now", category="diet", key="diet", scope=group, subject="user:1",
                                   said_by="user:2", replaces=ann.id))  # fmt: skip
    assert by_bob.action == "inserted"  # next to Ann's own fact, which stays current
    rows = await db.fetchall("select value, key, valid_until from facts order by id")
    assert [tuple(r) for r in rows] == [("Ann is vegan", "diet", None), ("Ann eats fish now", None, None)]
    by_ann = await store.save(Fact("Ann eats fish now, she says", category="diet", key="diet", scope=group,
                                   subject="user:1", said_by="user:1"))  # fmt: skip
    assert by_ann.action == "superseded" and by_ann.replaced == ann.id
    other_scope = await store.save(Fact("Tea", category="drink", scope="owner", replaces=by_ann.id))
    assert other_scope.action == "inserted"  # a fact of another label is never ended from here


def _v2_database(path: Path) -> None:
    conn = connect(path, pick_driver(), vectors=False)
    schema.migrate(conn, schema.MIGRATIONS[:2])
    for scope, value, key in (("owner", "The cat is Tom", "cat"), ("user:5151", "Alice likes tea", None),
                              ("chat:-100777", "Hike on Saturday", None)):  # fmt: skip
        conn.execute(
            "insert into facts(scope, category, key, value, hash, created_at, updated_at) values (?,?,?,?,?,?,?)",
            (scope, "misc", key, value, value, 1.7e9, 1.7e9),
        )
    conn.close()


async def test_an_older_database_gets_subjects_and_times_and_updates_work(tmp_path: Path) -> None:
    _v2_database(tmp_path / "old.db")
    db = await Database.open(tmp_path / "old.db")
    try:
        assert (db.info.schema_from, db.info.schema_to) == (2, schema.SCHEMA_VERSION)
        rows = await db.fetchall("select value, subject, valid_from, valid_until from facts order by id")
        assert [tuple(r) for r in rows] == [
            ("The cat is Tom", "owner", 1.7e9, None),
            ("Alice likes tea", "user:5151", 1.7e9, None),
            ("Hike on Saturday", "chat:-100777", 1.7e9, None),
        ]
        store = FactStore(db)
        moved = await store.save(Fact("The cat is Tim", category="misc", key="cat", subject="owner"))
        assert moved.action == "superseded"
        assert [f.value for f in await store.recall("cat", ["owner"])] == ["The cat is Tim"]
        await _fts_consistent(db)
    finally:
        await db.close()
