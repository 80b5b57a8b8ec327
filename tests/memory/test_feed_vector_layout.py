"""The feed's vectors in one float16 table with each message's chat, searched in memory within any set of
chats: the database grows with the messages, not with the number of chats, and an archive of the old layout
(a vec0 partition per chat, float16 copies without chat or code) is migrated in place without embedding
anything again."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import structlog

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.feed.embedding import FeedEmbedder, embed_pending, fill_codes
from teleton.memory.feed.search import search_feed
from teleton.memory.search.bit_index import index_for
from teleton.memory.search.corpora import FEED
from teleton.memory.search.vector_leg import vector_leg
from teleton.memory.search.vector_store import write_vectors
from teleton.storage import Database
from teleton.storage.vector_tables import HALF_VECTOR_TABLE
from tests.memory.test_all_chat_vectors import sentences, unit
from tests.memory.test_cache_and_feed import add
from tests.waiting import until

K = 10


async def test_a_search_within_chats_sees_their_rows_only_and_finds_the_exact_top(
    mdb: Database, embedder: LocalEmbedder
) -> None:
    rng, noise = random.Random(11), np.random.default_rng(11)
    pool = embedder.encode(sentences(rng, 200))
    # One big chat (beyond what is read back whole), one small one, and 300 chats of one or two messages.
    chats = [1] * 3000 + [2] * 15 + [100 + i // 2 for i in range(500)]
    vectors = unit(pool[noise.integers(200, size=len(chats))] + noise.normal(scale=0.02, size=(len(chats), 384)))
    await mdb.write(
        lambda conn: write_vectors(conn, FEED, list(zip(range(1, len(chats) + 1), chats, vectors, strict=True)))
    )
    chat_of = dict(zip(range(1, len(chats) + 1), chats, strict=True))
    queries = embedder.encode(sentences(rng, 20))

    def exact(query: np.ndarray, scope: set[int]) -> set[int]:
        ids = np.array([i for i, c in chat_of.items() if c in scope])
        return set(ids[np.argsort(-(vectors[ids - 1] @ query))[:K]].tolist())

    recalls = []
    for query in queries:
        for scope in ({1}, {2}, {100, 101, 2}, {150}):
            found = await mdb.read(lambda conn, q=query, s=scope: vector_leg(conn, FEED, q, K, sorted(s)))
            assert {chat_of[i] for i in found} <= scope  # never a row of another chat
            expected = exact(query, scope)
            if scope != {1}:
                assert set(found) == expected  # a scope of up to 2k rows is read back whole: exact
            else:
                recalls.append(len(expected & set(found)) / K)
    assert float(np.mean(recalls)) >= 0.95
    assert await mdb.read(lambda conn: vector_leg(conn, FEED, queries[0], K, [999])) == {}  # a chat with none


async def test_the_database_grows_with_the_messages_not_with_the_chats(tmp_path: Path, embedder) -> None:
    """2,000 chats of two messages: with one vec0 partition per chat they took 1.5 MB each (3 GB)."""
    db = await Database.open(tmp_path / "many.db", embedding=(embedder.model_id, embedder.dims))
    try:
        vectors = unit(np.random.default_rng(3).normal(size=(4000, embedder.dims)))
        await db.write(lambda conn: write_vectors(conn, FEED, [(i + 1, i // 2, v) for i, v in enumerate(vectors)]))
        size = (await db.fetchone("select page_count * page_size from pragma_page_count(), pragma_page_size()"))[0]
        assert size < 4000 * embedder.dims * 2 * 1.5  # the float16 vectors, and little else
    finally:
        await db.close()


async def test_an_archive_of_the_old_layout_is_migrated_and_answers_the_same(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    path = tmp_path / "old.db"
    db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))
    talk = {
        3: ["the garage code is 4512", "thanks, see you at dinner", "my sister flies to Lisbon on Friday"],
        4: ["the concert starts at nine", "bring the guitar", "the ferry leaves from pier two"],
    }
    for chat, texts in talk.items():
        await db.write(lambda conn, c=chat, t=texts: add(conn, c, t))
    assert await embed_pending(db, embedder) == 6
    questions = ["what is the door code?", "when does the ferry go?", "where is my sister going?"]

    async def answers(database: Database) -> list[list[str]]:
        found = []
        for question in questions:
            for chats in (None, [3], [4]):
                hits = await search_feed(database, question, chat_ids=chats, provider=embedder)
                found.append([h.text for h in hits])
        return found

    before = await answers(db)

    def old_layout(conn) -> None:
        # As Teleton wrote it before: a vec0 table with a partition per chat beside the float16 copies (which
        # had no chat), and one message whose float16 copy is missing.
        conn.execute(
            f"create virtual table tg_messages_vec using vec0(id integer primary key, chat_id integer partition key, "
            f"embedding float[{embedder.dims}])"
        )
        for row_id, chat, vector in conn.execute(f"select h.id, m.chat_id, h.vector from {HALF_VECTOR_TABLE} h "
                                                 "join tg_messages m on m.id = h.id").fetchall():  # fmt: skip
            full = np.frombuffer(vector, np.float16).astype(np.float32).tobytes()
            conn.execute("insert into tg_messages_vec(id, chat_id, embedding) values (?, ?, ?)", (row_id, chat, full))
        copies = conn.execute(f"select id, vector from {HALF_VECTOR_TABLE} where id != 2 order by id").fetchall()
        conn.execute(f"drop table {HALF_VECTOR_TABLE}")
        conn.execute(f"create table {HALF_VECTOR_TABLE} (seq integer primary key autoincrement, "
                     "id integer not null unique, vector blob not null)")  # fmt: skip
        conn.executemany(f"insert into {HALF_VECTOR_TABLE}(id, vector) values (?, ?)", copies)

    await db.write(old_layout)
    await db.close()
    with structlog.testing.capture_logs() as logs:
        db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))
    try:
        tables = {r[0] for r in await db.fetchall("select name from sqlite_master")}
        assert "tg_messages_vec" not in tables and not any(t.startswith("tg_messages_vec_") for t in tables)
        scopes = await db.fetchall(f"select h.scope, m.chat_id from {HALF_VECTOR_TABLE} h join tg_messages m using(id)")
        assert len(scopes) == 6 and all(s == c for s, c in scopes)  # the missing copy was converted
        assert next(e for e in logs if e["event"] == "feed_vectors_migrated")["converted"] == 1
        assert await embed_pending(db, embedder) == 0  # nothing embedded again
        assert await answers(db) == before  # the index codes the old rows from their vectors
        # The embedding worker stores their codes, so the next start reads no vector; the index from the
        # stored codes answers the same.
        assert (await db.fetchone(f"select count(*) from {HALF_VECTOR_TABLE} where code is null"))[0] == 6
        assert await fill_codes(db, batch=4) == 6
        assert (await db.fetchone(f"select count(*) from {HALF_VECTOR_TABLE} where code is null"))[0] == 0
        await db.read(lambda conn: index_for(conn, FEED).invalidate())
        assert await answers(db) == before
    finally:
        await db.close()


async def test_the_embedding_worker_codes_the_vectors_of_an_older_archive(mdb: Database, embedder) -> None:
    vectors = unit(np.random.default_rng(5).normal(size=(7, embedder.dims)))
    await mdb.write(lambda conn: write_vectors(conn, FEED, [(i + 1, 1, v) for i, v in enumerate(vectors)]))
    coded = await mdb.fetchall(f"select id, code from {HALF_VECTOR_TABLE} order by id")
    await mdb.execute(f"update {HALF_VECTOR_TABLE} set code = null")  # as an archive from before the codes

    async def all_coded() -> bool:
        return (await mdb.fetchone(f"select count(*) from {HALF_VECTOR_TABLE} where code is null"))[0] == 0

    worker = FeedEmbedder(mdb, embedder, interval=3600)
    worker.start()
    try:
        await until(all_coded)
    finally:
        await worker.stop()
    assert await mdb.fetchall(f"select id, code from {HALF_VECTOR_TABLE} order by id") == coded  # the same codes


async def test_the_index_loads_coded_uncoded_and_chatless_rows_alike(mdb: Database, embedder) -> None:
    # The start reads the codes of many rows in one value per column; rows from before codes were stored, and
    # rows without a chat, must land beside the right ids all the same.
    vectors = unit(np.random.default_rng(7).normal(size=(12, embedder.dims)))
    rows = [(i + 1, 1 + i % 3, v) for i, v in enumerate(vectors)]
    await mdb.write(lambda conn: write_vectors(conn, FEED, rows))
    await mdb.execute(f"update {HALF_VECTOR_TABLE} set scope = null where id in (2, 5)")

    async def nearest_of_each() -> list[tuple[dict[int, float], dict[int, float]]]:
        await mdb.read(lambda conn: index_for(conn, FEED).invalidate())  # a fresh load, as at a start
        return [
            (
                await mdb.read(lambda conn, v=v: vector_leg(conn, FEED, v, 1, None)),
                await mdb.read(lambda conn, v=v, c=c: vector_leg(conn, FEED, v, 1, [c])),
            )
            for _, c, v in rows
        ]

    coded = await nearest_of_each()
    assert [list(everywhere) for everywhere, _ in coded] == [[i] for i in range(1, 13)]  # each finds itself
    assert [i in in_chat for i, (_, in_chat) in enumerate(coded, 1)] == [i not in (2, 5) for i in range(1, 13)]
    await mdb.execute(f"update {HALF_VECTOR_TABLE} set code = null where id in (3, 4, 9)")
    assert await nearest_of_each() == coded
