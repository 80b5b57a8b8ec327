"""The vector leg across all chats (an owner's search): near-exact at archive scale, and always current.

It runs on the float16 copy of the feed's vectors and an in-memory bit index of them (``bit_index``); these
tests hold it to what an exact search over the same vectors finds, after new, re-embedded, deleted and
re-modelled vectors.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.search import bit_index, vector_codes
from teleton.memory.search.corpora import FEED
from teleton.memory.search.vector_leg import vector_leg
from teleton.memory.search.vector_store import delete_vectors, write_vectors
from teleton.storage import Database
from teleton.storage.vector_tables import HALF_VECTOR_TABLE

ROWS, CHATS, POOL, K = 100_000, 200, 500, 30
WORDS = (
    "coffee dinner train flight hotel beach hike bike meeting deadline release server invoice rent kitchen garden "
    "cat dog doctor birthday party concert guitar movie book exam school weather rain holiday wedding photo phone "
    "game recipe bread today tomorrow weekend really maybe great thanks we you they went bought lost found love"
).split()


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def sentences(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) for _ in range(n)]


def exact_top(vectors: dict[int, np.ndarray], query: np.ndarray, k: int) -> list[int]:
    ids = list(vectors)
    scores = np.stack([vectors[i] for i in ids]) @ query
    return [ids[i] for i in np.argsort(-scores)[:k]]


async def test_all_chat_search_at_100k_keeps_at_least_95_percent_of_the_exact_top_30(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    # Made as scripts/bench_search.py makes its archive: real embeddings of a pool of chat-like sentences,
    # each message one of them plus a little noise. Real sentence vectors share a common direction, which
    # is what makes sign bits lose neighbours (0.39 of the exact top 30 with sqlite-vec's bit KNN x3).
    rng, noise = random.Random(2026), np.random.default_rng(2026)
    pool = embedder.encode(sentences(rng, POOL))
    vectors = unit(pool[noise.integers(POOL, size=ROWS)] + noise.normal(scale=0.02, size=(ROWS, pool.shape[1])))
    queries = embedder.encode(sentences(rng, 40))
    db = await Database.open(tmp_path / "big.db", embedding=(embedder.model_id, embedder.dims))
    try:
        half = vectors.astype(np.float16)
        await db.write(
            lambda conn: conn.executemany(
                f"insert into {HALF_VECTOR_TABLE}(id, vector) values (?, ?)",
                ((i + 1, half[i].tobytes()) for i in range(ROWS)),
            )
        )
        recalls = []
        for query in queries:
            exact = {int(i) + 1 for i in np.argsort(-(vectors @ query))[:K]}
            found = await db.read(lambda conn, q=query: vector_leg(conn, FEED, q, K, None))
            assert len(found) == K
            recalls.append(len(exact & set(found)) / K)
        assert float(np.mean(recalls)) >= 0.95, f"recall@30 {np.mean(recalls):.3f} (min {min(recalls):.2f})"
    finally:
        await db.close()


async def test_all_chat_search_follows_new_rewritten_and_deleted_vectors(mdb: Database, embedder) -> None:
    rng = random.Random(7)
    texts = sentences(rng, 60)
    vectors = dict(zip(range(1, 61), embedder.encode(texts), strict=True))
    await mdb.write(lambda conn: write_vectors(conn, FEED, [(i, i % 6, v) for i, v in vectors.items()]))
    query = embedder.encode(["a birthday party with cake and a concert"])[0]

    async def search(k: int = 10) -> list[int]:
        found = await mdb.read(lambda conn: vector_leg(conn, FEED, query, k, None))
        return sorted(found, key=lambda i: -found[i])

    # A small archive: every vector is a candidate, so the order is the exact one (float16 rounding aside).
    assert await search() == exact_top(vectors, query, 10)
    # New messages are found by the next search, without any restart.
    vectors[61] = embedder.encode(["the birthday party with cake and a concert"])[0]
    await mdb.write(lambda conn: write_vectors(conn, FEED, [(61, 1, vectors[61])]))
    assert (await search())[0] == 61
    # A re-embedded message (an edit) is scored by its new vector only.
    vectors[61] = embedder.encode(["renewing the car insurance policy"])[0]
    await mdb.write(lambda conn: write_vectors(conn, FEED, [(61, 1, vectors[61])]))
    assert await search() == exact_top(vectors, query, 10)
    # Many older messages embedded again at once (a batch of edits, a re-embedding): each keeps one place,
    # scored by its new vector.
    again = dict(zip(range(1, 41), embedder.encode(sentences(rng, 40)), strict=True))
    vectors.update(again)
    await mdb.write(lambda conn: write_vectors(conn, FEED, [(i, i % 6, v) for i, v in again.items()]))
    assert await mdb.read(lambda conn: len(bit_index.index_for(conn, FEED))) == 61  # no row twice
    assert await search(61) == exact_top(vectors, query, 61)
    # An erased message is never returned.
    gone = (await search())[:3]
    await mdb.write(lambda conn: delete_vectors(conn, FEED, gone))
    for row_id in gone:
        del vectors[row_id]
    assert await search() == exact_top(vectors, query, 10)


async def test_deleted_vectors_stop_taking_candidate_places(
    mdb: Database, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With one candidate per wanted result, stale codes of erased rows would each cost a result; the index
    # notices the misses and rebuilds, so the next search has the full count again. (An index past the float
    # copy's size: a small one has every row's vector at hand.)
    monkeypatch.setattr(bit_index, "OVERSAMPLE", 1)
    monkeypatch.setattr(bit_index, "EXACT_ROWS", 0)
    rng = random.Random(8)
    vectors = dict(zip(range(1, 41), embedder.encode(sentences(rng, 40)), strict=True))
    await mdb.write(lambda conn: write_vectors(conn, FEED, [(i, 1, v) for i, v in vectors.items()]))
    query = embedder.encode(["dinner at the hotel"])[0]
    first = await mdb.read(lambda conn: vector_leg(conn, FEED, query, 5, None))
    await mdb.write(lambda conn: delete_vectors(conn, FEED, list(first)))
    for row_id in first:
        del vectors[row_id]
    searches = [await mdb.read(lambda conn: vector_leg(conn, FEED, query, 5, None)) for _ in range(2)]
    assert not set(first) & (set(searches[0]) | set(searches[1]))
    assert len(searches[0]) < 5 and len(searches[1]) == 5


async def test_an_index_growing_past_its_float_copy_finds_the_same_rows(
    mdb: Database, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small archive is searched on float copies of its vectors; past EXACT_ROWS the copy is let go (its memory
    # with it) and the codes take over, with the same answers where both are exact.
    monkeypatch.setattr(bit_index, "EXACT_ROWS", 50)
    rng = random.Random(9)
    vectors = dict(zip(range(1, 71), embedder.encode(sentences(rng, 70)), strict=True))
    query = embedder.encode(["a concert on the weekend"])[0]

    async def search() -> list[int]:
        found = await mdb.read(lambda conn: vector_leg(conn, FEED, query, 10, None))
        return sorted(found, key=lambda i: -found[i])

    def held_floats(conn) -> bool:
        return bit_index.index_for(conn, FEED)._arrays.floats is not None

    first = {i: vectors[i] for i in range(1, 41)}
    await mdb.write(lambda conn: write_vectors(conn, FEED, [(i, i % 3, v) for i, v in first.items()]))
    assert await search() == exact_top(first, query, 10)
    assert await mdb.read(held_floats)
    # Erased meanwhile (an edited message, until it is embedded again): never returned, its place filled.
    gone = (await search())[:2]
    await mdb.write(lambda conn: delete_vectors(conn, FEED, gone))
    for row_id in gone:
        del first[row_id]
    assert await search() == exact_top(first, query, 10)
    await mdb.write(lambda conn: write_vectors(conn, FEED, [(i, i % 3, vectors[i]) for i in range(41, 71)]))
    assert await search() == exact_top({**first, **{i: vectors[i] for i in range(41, 71)}}, query, 10)
    assert not await mdb.read(held_floats)


async def test_a_new_model_starts_a_new_index_and_old_vectors_are_never_returned(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    path = tmp_path / "feed.db"
    db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))
    vectors = embedder.encode(["walking the dog", "buying bread"])
    await db.write(lambda conn: write_vectors(conn, FEED, [(1, 1, vectors[0]), (2, 1, vectors[1])]))
    assert set(await db.read(lambda conn: vector_leg(conn, FEED, vectors[0], 5, None))) == {1, 2}
    await db.close()
    db = await Database.open(path, embedding=("another-model", embedder.dims))
    try:
        assert await db.read(lambda conn: vector_leg(conn, FEED, vectors[0], 5, None)) == {}
        await db.write(lambda conn: write_vectors(conn, FEED, [(2, 1, vectors[1])]))
        assert set(await db.read(lambda conn: vector_leg(conn, FEED, vectors[0], 5, None))) == {2}
    finally:
        await db.close()


async def test_an_archive_with_the_old_bit_table_keeps_its_vectors(tmp_path: Path, embedder: LocalEmbedder) -> None:
    # Databases written before the float16 table kept the same copies in a vec0 bit table; they move over
    # on open, so an upgrade does not re-embed the archive.
    path = tmp_path / "old.db"
    db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))
    vectors = embedder.encode(["walking the dog", "buying bread"])

    def downgrade(conn) -> None:
        conn.execute(f"drop table {HALF_VECTOR_TABLE}")
        conn.execute(f"create virtual table tg_messages_vec_bits using vec0(id integer primary key, "
                     f"embedding bit[{embedder.dims}], +vector blob)")  # fmt: skip
        for i, v in enumerate(vectors, start=1):
            conn.execute(
                "insert into tg_messages_vec_bits(id, embedding, vector) values (?, vec_quantize_binary(?), ?)",
                (i, v.tobytes(), v.astype(np.float16).tobytes()),
            )

    await db.write(downgrade)
    await db.close()
    db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))
    try:
        found = await db.read(lambda conn: vector_leg(conn, FEED, vectors[1], 2, None))
        assert sorted(found, key=lambda i: -found[i]) == [2, 1]
        assert found[2] == pytest.approx(1.0, abs=1e-3)
        tables = await db.read(lambda conn: [r[0] for r in conn.execute("select name from sqlite_master")])
        assert "tg_messages_vec_bits" not in tables
    finally:
        await db.close()


async def test_codes_of_either_layout_and_64_bit_ids_find_the_same_rows(mdb: Database, embedder) -> None:
    # Codes stored before 2026-11-27 held two bits per dimension and two levels (104 bytes) after the same sign
    # words. Chat ids of channels and supergroups need 64 bits; the index numbers them, and holds row ids in 32
    # bits until one needs more.
    rng, noise = random.Random(11), np.random.default_rng(11)
    pool = embedder.encode(sentences(rng, 50))
    vectors = unit(pool[noise.integers(50, size=1_200)] + noise.normal(scale=0.02, size=(1_200, pool.shape[1])))
    chats = (-1001234567890, 777)
    rows = [(i + 1 if i < 600 else 2**31 + i, chats[i % 2], vectors[i]) for i in range(1_200)]
    chat_of = {row_id: chat for row_id, chat, _ in rows}
    queries = [*embedder.encode(sentences(rng, 4)), vectors[5], vectors[1_101]]

    async def searches() -> list[dict[int, float]]:
        def run(conn) -> list[dict[int, float]]:
            return [vector_leg(conn, FEED, q, 5, s) for q in queries for s in (None, [chats[0]], [chats[1]])]

        return await mdb.read(run)

    await mdb.write(lambda conn: write_vectors(conn, FEED, rows[:600]))
    assert all(await searches())
    await mdb.write(lambda conn: write_vectors(conn, FEED, rows[600:]))  # ids past 32 bits
    found = await searches()
    for n, hits in enumerate(found):
        scope = (None, chats[0], chats[1])[n % 3]
        assert len(hits) == 5 and all(scope in (None, chat_of[i]) for i in hits)
    # A stored vector searched for is its own nearest, in all chats and in its chat (777, the second scope).
    top = [max(hits, key=hits.__getitem__) for hits in found[-6:]]
    assert (top[0], top[2], top[3], top[5]) == (6, 6, 2**31 + 1_101, 2**31 + 1_101)

    def old_codes(conn) -> None:
        for row_id, code in conn.execute(f"select id, code from {HALF_VECTOR_TABLE}").fetchall():
            conn.execute(f"update {HALF_VECTOR_TABLE} set code = ? where id = ?", (code + bytes(range(56)), row_id))
        bit_index.index_for(conn, FEED).invalidate()

    await mdb.write(old_codes)
    assert await searches() == found


@given(st.lists(st.integers(0, 384), min_size=1, max_size=300), st.integers(1, 300))
def test_the_nearest_codes_are_the_smallest_distances_ties_by_position(distances: list[int], n: int) -> None:
    distance = np.array(distances, np.uint16)
    n = min(n, len(distances))
    expected = np.sort(np.argsort(distance, kind="stable")[:n])
    assert bit_index._smallest(distance, n).tolist() == expected.tolist()


@given(st.integers(1, 200), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_codes_are_re_ranked_by_the_query_against_their_signs(dims: int, rows: int, seed: int) -> None:
    # The read-back order: the query's dot product with each code's +-1 signs, for any width of vector.
    noise = np.random.default_rng(seed)
    vectors, query = noise.normal(size=(rows, dims)), noise.normal(size=dims).astype(np.float32)
    signs = np.where(vectors > 0, 1.0, -1.0)
    scores = vector_codes.sign_scores(vector_codes.pack_bits(vectors), query)
    assert np.allclose(scores, signs @ query, atol=1e-4)
