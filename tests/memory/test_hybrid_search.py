"""Hybrid search: safe queries, OR semantics, scope inside both legs, fusion rules, keyword-only fallback."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teleton.memory.feed.embedding import embed_pending
from teleton.memory.feed.search import search_feed, search_feed_sync
from teleton.memory.search import hybrid
from teleton.memory.search.corpora import FACTS, FEED, KNOWLEDGE, TOOLS
from teleton.memory.search.exact_words import holding_every
from teleton.memory.search.fts_query import keyword_shaped, keyword_terms, match_expression, query_terms
from teleton.memory.search.fusion import EXACT_MAX_ROWS, Fused, fuse, lift_exact, normalise_cosine, normalise_keyword
from teleton.memory.search.hybrid import SearchParams, hybrid_search, hybrid_search_db
from teleton.memory.search.vector_store import write_vectors
from teleton.storage import Database
from teleton.storage.database import connect
from teleton.storage.sqlite_driver import pick_driver


def add_messages(
    conn, chat_id: int, texts: list[str], *, start: float = 1_700_000_000.0, embedded: int = 0
) -> list[int]:
    ids = []
    for n, text in enumerate(texts):
        cur = conn.execute(
            "insert into tg_messages(chat_id, message_id, sender_name, date, text, embedded) values (?, ?, ?, ?, ?, ?)",
            (chat_id, n + 1 + chat_id * 100_000, f"user{chat_id}", start + n * 60, text, embedded),
        )
        ids.append(int(cur.lastrowid))
    return ids


NASTY = [
    '"',
    '""',
    "'",
    "*",
    "-",
    "- -",
    "NEAR",
    "NEAR(a b)",
    "a OR",
    "OR",
    "AND",
    "NOT",
    "(",
    ")",
    "col:foo",
    "text:secret",
    "sender_name:x",
    "^start",
    "a + b",
    "{a b}",
    "🙂🔥",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "你好世界",
    "x" * 10_000,
    "word " * 2_000,
    "\x00",
    "what's up?",
    "C++ -> rust*",
    "",
    "   ",
]


async def test_every_nasty_query_is_answered_without_error(mdb: Database, embedder):
    await mdb.write(lambda conn: add_messages(conn, 1, ["hello world", "Привет мир", "what's up?", "C++ is fun"]))
    await embed_pending(mdb, embedder)
    for query in NASTY:
        vector = embedder.encode([query])[0] if query.strip() else None
        await mdb.read(lambda conn, q=query, v=vector: hybrid_search(conn, FEED, q, v, scope=[1]))
        await mdb.read(lambda conn, q=query: hybrid_search(conn, KNOWLEDGE, q, None))
    hits = await mdb.read(lambda conn: hybrid_search(conn, FEED, "Привет", None, scope=None))
    assert hits and hits[0].text == "Привет мир"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300) | st.sampled_from(NASTY) | st.lists(st.sampled_from(NASTY)).map(" ".join))
def test_arbitrary_text_is_a_valid_query(tmp_path_factory: pytest.TempPathFactory, query: str) -> None:
    conn = _SYNC_DB.get(tmp_path_factory)
    for corpus in (FEED, KNOWLEDGE, FACTS, TOOLS):
        hybrid_search(conn, corpus, query, None)
        hybrid_search(conn, corpus, query, _UNIT, scope=None if corpus is TOOLS else ["1", 1])


_UNIT = np.full(384, 1 / np.sqrt(384), dtype=np.float32)


class _SyncDb:
    """One migrated database with a few rows, shared by the hypothesis examples (opened once)."""

    conn = None

    def get(self, factory: pytest.TempPathFactory) -> Any:
        if self.conn is None:
            from teleton.storage import schema, vector_tables

            path = factory.mktemp("hyp") / "h.db"
            conn = connect(path, pick_driver())
            schema.migrate(conn)
            vector_tables.ensure_vector_tables(conn, "unit", 384)
            conn.execute("begin")
            ids = add_messages(conn, 1, ["hello world", "NEAR the river", 'quotes " and * stars'])
            write_vectors(conn, FEED, [(i, 1, _UNIT) for i in ids])
            conn.execute("commit")
            self.conn = conn
        return self.conn


_SYNC_DB = _SyncDb()


def test_query_words_are_or_ed_and_stopwords_dropped() -> None:
    assert query_terms("What did Anna say about the trip to Lisbon?") == ["anna", "say", "trip", "lisbon"]
    assert match_expression('say "hi" NEAR(xy)') == '"say" OR "hi" OR "near" OR "xy"'
    assert query_terms("the") == ["the"]  # only stopwords: keep them rather than search nothing
    assert match_expression("🙂 ... !!!") is None


async def test_long_question_matches_a_row_sharing_only_some_words(mdb: Database):
    await mdb.write(lambda conn: add_messages(conn, 1, ["Lisbon trip is booked for May"]))
    # A day later: a new conversation, so the Lisbon message is not its context.
    await mdb.write(lambda conn: add_messages(conn, 2, ["unrelated chatter"], start=1_700_000_000.0 + 86_400))
    hits = await search_feed(
        mdb, "Could you please remind me what we decided about the Lisbon holiday plans?", chat_ids=[1, 2]
    )
    assert [h.text for h in hits] == ["Lisbon trip is booked for May"]


async def test_small_group_keeps_its_vector_hits_in_a_big_multichat_archive(mdb: Database, embedder):
    # 40 busy chats talk about football all day; the small group once talked about the match in other words.
    chatter = [
        "Did you watch the football match last night?",
        "What a goal in the second half of the game!",
        "The striker scored twice in the derby yesterday.",
        "Football tonight at eight, who is coming?",
    ]
    vectors = embedder.encode(chatter)

    def big_archive(conn) -> None:
        rows = []
        for chat in range(100, 140):
            ids = add_messages(conn, chat, [chatter[i % 4] for i in range(100)], embedded=1)
            rows += [(row_id, chat, vectors[i % 4]) for i, row_id in enumerate(ids)]
        write_vectors(conn, FEED, rows)

    await mdb.write(big_archive)
    group = [
        "Soccer tonight: we lost 2-1.",
        "I'm baking bread this weekend.",
        "Anyone has a spare charger?",
    ]
    await mdb.write(lambda conn: add_messages(conn, 7, group))
    await embed_pending(mdb, embedder)

    query = "who won the football match?"
    hits = await search_feed(mdb, query, chat_ids=[7], provider=embedder)
    assert hits, "the group's vector hit was crowded out by other chats"
    assert hits[0].text == group[0] and hits[0].chat_id == 7
    assert hits[0].keyword_score == 0 and hits[0].vector_score > 0
    assert all(h.chat_id == 7 for h in hits)

    # All chats (an owner DM): the other chats dominate, and nothing of chat 7 leaks into a chat-100 search.
    scoped = await search_feed(mdb, query, chat_ids=[100], provider=embedder)
    assert scoped and all(h.chat_id == 100 for h in scoped)
    assert await search_feed(mdb, query, chat_ids=[], provider=embedder) == []


async def test_without_vectors_search_is_keyword_only(tmp_path: Path):
    db = await Database.open(tmp_path / "plain.db", embedding=None)
    try:
        await db.write(lambda conn: add_messages(conn, 1, ["the invoice is due on Monday", "ok, paying it today"]))
        vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
        hits = await db.read(lambda conn: search_feed_sync(conn, "invoice due", vector, None))
        assert hits[0].text == "the invoice is due on Monday"
        assert hits[0].score == pytest.approx(1.0)  # keyword leg alone decides: full weight
        # The reply is found through its context (the message it answers), ranked below the match itself.
        assert [h.text for h in hits[1:]] == ["ok, paying it today"] and hits[1].score < 0.5
    finally:
        await db.close()


async def test_deleted_messages_are_not_found(mdb: Database):
    ids = await mdb.write(lambda conn: add_messages(conn, 1, ["secret plan alpha", "public plan beta"]))
    await mdb.execute("update tg_messages set deleted = 1 where id = ?", (ids[0],))
    assert [h.text for h in await search_feed(mdb, "plan", chat_ids=None)] == ["public plan beta"]


def test_fusion_rules() -> None:
    keyword = normalise_keyword({1: 8.0, 2: 4.0, 3: 0.5})
    assert keyword == {1: 1.0, 2: 0.5, 3: 0.0625}
    vector = normalise_cosine({1: 0.8, 4: 0.45, 5: 0.05})
    assert vector[1] == 1.0 and vector[5] == 0.0 and 0 < vector[4] < 1
    fused = fuse(vector, keyword, 0.5, 0.5, min_score=0.15, limit=10)
    assert [f.id for f in fused] == [1, 2, 4]  # 3 and 5 fall under the minimum score
    assert fused[0].score == pytest.approx(1.0)
    assert fused[1].score == pytest.approx(0.25)  # keyword-only hit keeps its own weight
    tools = fuse(vector, keyword, 0.6, 0.4, min_score=0.0, limit=2)
    assert len(tools) == 2 and tools[1].id == 4  # tools weigh the vector leg more
    # Row 2 has no vector yet (a backlog being re-embedded): its words alone judge it, as keyword-only search
    # would, instead of a missing cosine counting as "unrelated".
    waiting = fuse(vector, keyword, 0.8, 0.2, min_score=0.15, limit=10, unembedded={2})
    assert [f.id for f in waiting] == [1, 2, 4] and waiting[1].score == pytest.approx(0.5)
    assert 2 not in [f.id for f in fuse(vector, keyword, 0.8, 0.2, min_score=0.15, limit=10)]


def test_which_queries_are_keyword_shaped() -> None:
    assert keyword_shaped("lighthouse")
    assert keyword_shaped("Anna's wedding photos")  # "'s" is no word of its own
    assert keyword_shaped("the lighthouse in Maine")  # stopwords are not counted
    assert not keyword_shaped("lighthouse?")
    assert not keyword_shaped("what is a lighthouse")
    assert not keyword_shaped("где маяк")
    assert not keyword_shaped("¿Dónde está el faro?")
    assert not keyword_shaped("old lighthouse photos from Maine")  # four content words: a description
    assert not keyword_shaped("")


def test_a_word_holds_in_a_text_as_the_index_matches_it() -> None:
    rows = [
        (1, "Lighthouses at dusk"),  # porter: the same stem
        (2, "a light house on the rocks"),  # two other words
        (3, "Мы переехали в Порто"),  # a Russian word's stem prefix
    ]
    assert holding_every(rows, keyword_terms("lighthouse")) == {1}
    assert holding_every(rows, keyword_terms("переехала Порто")) == {3}
    assert holding_every(rows, keyword_terms("lighthouse rocks")) == set()


def test_exact_rows_rise_above_the_rest_in_their_own_order() -> None:
    merged = [Fused(1, 0.70, 0.9, 0.0), Fused(2, 0.40, 0.2, 1.0), Fused(3, 0.30, 0.1, 0.9), Fused(4, 0.2, 0.2, 0.2)]
    lifted = {item.id: item.score for item in lift_exact(merged, {2, 3})}
    assert lifted[2] > lifted[3] > lifted[1] == 0.70 and lifted[4] == 0.2
    assert lifted[3] == pytest.approx(0.71)
    # Below the minimum score on its own, an exact row is still kept, with the others or alone.
    kept = fuse({1: 0.5}, {2: 0.1, 1: 0.0}, 0.8, 0.2, min_score=0.15, limit=10, exact={2})
    assert [f.id for f in kept] == [2, 1]
    alone = fuse({1: 0.1}, {2: 0.5, 1: 0.0}, 0.8, 0.2, min_score=0.15, limit=10, exact={2})
    assert [f.id for f in alone] == [2] and alone[0].score == pytest.approx(0.16)
    # A word held by more rows than that is no rare word: the blend alone decides.
    many = [Fused(i, 0.5 - i / 100, 0.5, 0.5) for i in range(EXACT_MAX_ROWS + 1)] + [Fused(99, 0.9, 0.9, 0.0)]
    assert lift_exact(many, set(range(EXACT_MAX_ROWS + 1))) == many


async def test_limits_and_min_score_come_from_params(mdb: Database):
    await mdb.write(lambda conn: add_messages(conn, 1, [f"apple pie recipe number {i}" for i in range(30)]))
    hits = await search_feed(mdb, "apple", chat_ids=[1], params=SearchParams(limit=4))
    assert len(hits) == 4
    assert await search_feed(mdb, "apple", chat_ids=[1], params=SearchParams(min_score=1.01)) == []


async def test_repeated_scoped_search_answers_the_same_from_its_chat_alone(mdb: Database, embedder):
    # Search latency (p50/p95, scoped and across chats, 10k and 100k messages) is scripts/bench_search.py's.
    await mdb.write(
        lambda conn: [add_messages(conn, c, [f"note {i} on topic {c}" for i in range(10)]) for c in range(20)]
    )
    await embed_pending(mdb, embedder)
    query = embedder.encode(["topic 3 note"])[0]
    answers = [await mdb.read(lambda conn: search_feed_sync(conn, "topic 3 note", query, [3])) for _ in range(20)]
    first = answers[0]
    assert first and all(h.chat_id == 3 and h.text.endswith("on topic 3") for h in first)
    assert all([h.id for h in hits] == [h.id for h in first] for hits in answers)


async def test_the_keyword_leg_searches_while_the_question_is_embedded(
    mdb: Database, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A turn hands the feed search its question's embedding still being computed: the keyword leg, which needs
    # no vector, runs first, and the answer is the one the finished vector gives.
    texts = ["The ferry to the island leaves at nine.", "Dinner at the hotel on Friday.", "A lighthouse on the island."]
    ids = await mdb.write(lambda conn: add_messages(conn, 7, texts))
    rows = [(row_id, 7, v) for row_id, v in zip(ids, embedder.encode(texts), strict=True)]
    await mdb.write(lambda conn: write_vectors(conn, FEED, rows))
    query = "when does the ferry leave for the island"
    vector = embedder.encode_queries([query])[0]
    expected = await hybrid_search_db(mdb, FEED, query, vector, scope=[7])
    loop, pending = asyncio.get_running_loop(), asyncio.get_running_loop().create_future()
    seen = []
    real_leg = hybrid.keyword_leg

    def keyword_leg(*args: Any) -> dict[int, float]:
        seen.append(pending.done())  # on its reader thread, before the vector exists
        found = real_leg(*args)
        loop.call_soon_threadsafe(pending.set_result, vector)
        return found

    monkeypatch.setattr(hybrid, "keyword_leg", keyword_leg)
    # (A search that waited for the vector first would wait for ever: the guard only turns that into a failure.)
    found = await asyncio.wait_for(hybrid_search_db(mdb, FEED, query, pending, scope=[7]), timeout=120)
    assert seen == [False]
    assert [(h.id, h.score) for h in found] == [(h.id, h.score) for h in expected] and found[0].id == ids[0]
