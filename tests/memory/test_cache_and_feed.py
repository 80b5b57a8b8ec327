"""The embedding cache (TTL, size cap, LRU, per model) and the feed's background embedding."""

from __future__ import annotations

import numpy as np

from teleton.memory.embeddings.cached import DAY, CachedProvider
from teleton.memory.feed.embedding import FeedEmbedder, FeedMessage, embed_pending, index_text
from teleton.memory.feed.search import search_feed
from teleton.storage import Database
from teleton.storage.feed_context import FEED_CONTEXT_CHARS
from tests.waiting import until

from .conftest import CountingProvider


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def cache_rows(db: Database) -> int:
    return (await db.fetchone("select count(*) from embedding_cache"))[0]


async def _none_waiting(db: Database) -> bool:
    return (await db.fetchone("select count(*) from tg_messages where embedded = 0"))[0] == 0


async def test_cached_provider_is_a_provider_and_avoids_repeat_work(mdb: Database, counting: CountingProvider):
    cached = CachedProvider(counting, mdb)
    assert (cached.model_id, cached.dims) == (counting.model_id, counting.dims)
    first = await cached.embed(["alpha", "beta", "alpha"])
    assert counting.texts == 2  # duplicates inside one call are embedded once
    second = await cached.embed(["beta", "alpha", "gamma"])
    assert counting.texts == 3  # only gamma was new
    assert np.allclose(second[0], first[1]) and np.allclose(second[1], first[0])
    assert cached.hits == 2 and await cache_rows(mdb) == 3


async def test_entries_expire_after_the_ttl(mdb: Database, counting: CountingProvider):
    clock = Clock()
    cached = CachedProvider(counting, mdb, ttl_days=60, clock=clock)
    await cached.embed(["old news"])
    clock.now += 59 * DAY
    await cached.embed(["old news"])
    assert counting.texts == 1  # still fresh at 59 days
    clock.now += 2 * DAY
    await cached.embed(["old news"])
    assert counting.texts == 2  # 61 days after it was computed: embedded again


async def test_expired_entries_are_purged(mdb: Database, counting: CountingProvider):
    clock = Clock()
    cached = CachedProvider(counting, mdb, ttl_days=60, clock=clock)
    await cached.embed(["one", "two"])
    clock.now += 61 * DAY
    await cached.embed(["three"])
    assert await cache_rows(mdb) == 1


async def test_size_cap_evicts_the_least_recently_used(mdb: Database, counting: CountingProvider):
    clock = Clock()
    cached = CachedProvider(counting, mdb, max_entries=5, clock=clock)
    for i in range(5):
        clock.now += 1
        await cached.embed([f"text {i}"])
    clock.now += 1
    await cached.embed(["text 0", "text 1"])  # used again: now the most recent
    clock.now += 1
    await cached.embed(["text 5", "text 6"])  # two over the cap
    assert await cache_rows(mdb) == 5
    calls = counting.texts
    await cached.embed(["text 0", "text 1", "text 4", "text 5", "text 6"])
    assert counting.texts == calls  # the survivors: recently used ones
    await cached.embed(["text 2"])
    assert counting.texts == calls + 1  # text 2 and 3 (least recently used) were evicted


async def test_two_models_never_share_cache_entries(mdb: Database, embedder):
    a = CountingProvider(embedder)
    b = CountingProvider(embedder, model_id="other-model")
    await CachedProvider(a, mdb).embed(["shared text"])
    await CachedProvider(b, mdb).embed(["shared text"])
    assert a.texts == 1 and b.texts == 1


def test_index_text_carries_the_conversation_before_the_message() -> None:
    question = FeedMessage(1, 5, "Anna", "What did you paint last week?", 100.0)
    answer = FeedMessage(2, 5, "Ben", "A sunset over the lake.", 160.0)
    assert index_text(answer, [question]) == "Anna: What did you paint last week?\nBen: A sunset over the lake."
    photo = FeedMessage(3, 5, "Ben", "", 170.0, media_kind="photo")
    assert index_text(photo, []) == "Ben: [photo]"


def add(conn, chat_id: int, texts: list[str], start: float = 1_700_000_000.0) -> list[int]:
    return [
        int(
            conn.execute(
                "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (?, ?, ?, ?, ?)",
                (chat_id, n + 1, "Anna" if n % 2 == 0 else "Ben", start + n * 30, text),
            ).lastrowid
        )
        for n, text in enumerate(texts)
    ]


async def test_answers_are_found_through_the_question_they_answer(mdb: Database, embedder):
    await mdb.write(lambda conn: add(conn, 5, ["What did you paint last week?", "A sunset over the lake.", "Nice!"]))
    stored = await embed_pending(mdb, embedder)
    assert stored == 3
    assert (await mdb.fetchone("select count(*) from tg_messages where embedded = 0"))[0] == 0
    hits = await search_feed(mdb, "what did Ben paint?", chat_ids=[5], provider=embedder)
    assert "A sunset over the lake." in [h.text for h in hits[:2]]


async def test_a_long_paste_is_the_next_messages_keyword_context_only_by_its_head(mdb: Database, embedder):
    paste = "HEADWORD opens the log\n" + "a line of the pasted log\n" * 1_000 + "TAILWORD closes it"
    assert len(paste) > FEED_CONTEXT_CHARS
    ids = await mdb.write(lambda conn: add(conn, 5, [paste, "ok, reading it", "done"]))

    async def found(word: str) -> set[int]:
        return {h.id for h in await search_feed(mdb, word, chat_ids=[5])}

    for _ in ("as archived", "as embedded"):
        assert await found("tailword") == {ids[0]}  # the next two rows do not hold the whole paste again
        assert await found("headword") == set(ids)  # its head is their context
        assert await embed_pending(mdb, embedder) in (3, 0)


async def test_an_edit_is_reembedded(mdb: Database, embedder):
    ids = await mdb.write(lambda conn: add(conn, 5, ["meeting moved to Tuesday"]))
    await embed_pending(mdb, embedder)
    await mdb.execute("update tg_messages set text = 'meeting cancelled, sorry', edited = 1 where id = ?", (ids[0],))
    assert (await mdb.fetchone("select embedded from tg_messages where id = ?", (ids[0],)))[0] == 0
    assert await embed_pending(mdb, embedder) == 1
    stored = await mdb.fetchone("select vector from tg_messages_vec16 where id = ?", (ids[0],))
    expected = embedder.encode(["Anna: meeting cancelled, sorry"])[0]
    assert np.allclose(np.frombuffer(stored[0], dtype=np.float16), expected, atol=1e-3)


async def test_background_embedder_catches_up_after_a_notify(mdb: Database, embedder):
    worker = FeedEmbedder(mdb, embedder, interval=3600)  # only the notify can wake it within the test
    worker.start()
    try:
        await mdb.write(lambda conn: add(conn, 9, [f"burst message {i}" for i in range(70)]))
        worker.notify()
        await until(lambda: _none_waiting(mdb), interval_s=0.05)  # the worker caught up
        assert (await mdb.fetchone("select count(*) from tg_messages_vec16"))[0] == 70
    finally:
        await worker.stop()


async def test_feed_reembeds_after_a_model_change(tmp_path, embedder):
    path = tmp_path / "feed.db"
    db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))
    await db.write(lambda conn: add(conn, 3, ["the garage code is 4512", "thanks"]))
    await embed_pending(db, embedder)
    await db.close()
    other = CountingProvider(embedder, model_id="renamed-model")
    db = await Database.open(path, embedding=(other.model_id, other.dims))
    try:
        assert (await db.fetchone("select count(*) from tg_messages_vec16"))[0] == 0
        assert await embed_pending(db, other) == 2 and other.texts == 2
        hits = await search_feed(db, "door code for the garage", chat_ids=[3], provider=other)
        assert hits[0].text == "the garage code is 4512" and hits[0].vector_score > 0
    finally:
        await db.close()


async def test_facts_are_reembedded_after_a_model_change(tmp_path, embedder):
    from teleton.memory.reembed import reembed_all
    from teleton.memory.search.corpora import FACTS
    from teleton.memory.search.hybrid import hybrid_search

    def add_fact(conn) -> None:
        conn.execute(
            "insert into facts(category, key, value, scope, hash, created_at, updated_at) "
            "values ('preference', 'drink', 'prefers green tea over coffee', 'user', 'h1', 0, 0)"
        )

    path = tmp_path / "facts.db"
    db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))
    await db.write(add_fact)
    assert (await reembed_all(db, embedder))["facts"] == 1
    await db.close()

    other = CountingProvider(embedder, model_id="yet-another-model")
    db = await Database.open(path, embedding=(other.model_id, other.dims))
    try:
        assert (await db.fetchone("select embedded from facts"))[0] == 0
        assert await reembed_all(db, other) == {"knowledge": 0, "feed": 0, "facts": 1}
        vector = (await other.embed(["what does the owner like to drink?"]))[0]
        hits = await db.read(lambda conn: hybrid_search(conn, FACTS, "beverage", vector, scope=["user"]))
        assert hits and hits[0].vector_score > 0 and hits[0].keyword_score == 0
    finally:
        await db.close()
