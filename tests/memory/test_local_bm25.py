"""Keyword ranking with the scope's own statistics: other chats, other fact scopes and other knowledge labels
never move a scope's ranking, and a store holding one scope ranks exactly as FTS5's bm25() does."""

from __future__ import annotations

import random
import time

import pytest

from teleton.memory.facts.recall import search_in_categories
from teleton.memory.search import local_bm25
from teleton.memory.search.corpora import FACTS, FEED, KNOWLEDGE
from teleton.memory.search.hybrid import DEFAULT_PARAMS, keyword_leg
from teleton.memory.search.local_bm25 import (
    HIGHLIGHT_MAX_ROWS,
    Scope,
    _row_length,
    _varints,
    drop_common_terms,
    term_counts,
)
from teleton.storage import Database, connect
from teleton.storage.sqlite_driver import pick_driver
from tests.memory.test_hybrid_search import add_messages

CHAT = [
    "Anna painted a sunset over the lake last weekend",
    "The lake house needs a new roof before winter",
    "We went hiking with the dog, the dog loved the lake",
    "Painting classes start in May, Anna signed up",
    "The roof guy is coming on Tuesday",
    "Pottery is my new thing, I made a bowl",
    "A sunset photo from the pier",
    "Let's meet for coffee after the painting class",
] * 3
QUERIES = ["what did Anna paint at the lake", "roof repair", "dog hiking lake", "sunset pier photo", "pottery bowl"]
WORDS = "lake roof dog sunset paint painting anna coffee class pier photo bowl the a of".split()


def noise(rng: random.Random, n: int) -> list[str]:
    """Other chats' chatter, heavy in the searched chat's words and of another length."""
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 30))) for _ in range(n)]


async def feed_rankings(db: Database, chat: int) -> dict[str, list[tuple[int, float]]]:
    def rank(conn) -> dict[str, list[tuple[int, float]]]:
        return {q: list(keyword_leg(conn, FEED, q, 30, [chat]).items()) for q in QUERIES}

    return await db.read(rank)


async def test_other_chats_text_never_moves_a_chats_keyword_ranking(db: Database) -> None:
    await db.write(lambda conn: add_messages(conn, 7, CHAT))
    before = await feed_rankings(db, 7)
    assert all(before.values())
    rng = random.Random(5)
    await db.write(lambda conn: [add_messages(conn, 100 + c, noise(rng, 1_000)) for c in range(10)])
    after = await feed_rankings(db, 7)
    assert after == before  # the same rows, the same order, the same scores: 10k messages elsewhere changed nothing


RUSSIAN_CHAT = [
    "Переехали в новую квартиру на прошлой неделе",
    "Квартира большая, но переезд нас вымотал",
    "Кот до сих пор прячется под диваном",
    "Купили коту новый домик, он в нём спит",
    "Соседи сверху шумят по вечерам",
] * 4


@pytest.mark.parametrize(
    ("chat", "queries", "others"),
    [
        # Few rows: each word's matches are found and counted in one query.
        (CHAT, QUERIES, 0),
        (RUSSIAN_CHAT, ["когда они переезжали в квартиру", "где спит котик", "шумные соседи"], 0),
        # Many: counted first; a word of few matches then counted from highlight() markers (in a large table),
        # one of many from bm25().
        (CHAT, QUERIES, 600),
    ],
)
@pytest.mark.parametrize("large_table", [False, True])
async def test_one_scope_ranks_exactly_as_fts5_bm25(
    db: Database, chat: list[str], queries: list[str], others: int, large_table: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if large_table:  # as if the archive held more than HIGHLIGHT_MIN_TABLE_ROWS: a few words counted by highlight()
        monkeypatch.setattr(local_bm25, "HIGHLIGHT_MIN_TABLE_ROWS", 0)
    rng = random.Random(9)
    await db.write(lambda conn: add_messages(conn, 7, chat + noise(rng, others)))
    if others:
        counts = await db.read(
            lambda conn: term_counts(
                conn, fts=FEED.fts, table=FEED.table, scope=Scope(), terms=['"lake"', '"pottery"'], cap=10_000
            )
        )
        assert counts['"lake"'] > HIGHLIGHT_MAX_ROWS >= counts['"pottery"'] > 0

    def both(conn, query: str) -> tuple[dict[int, float], dict[int, float]]:
        return keyword_leg(conn, FEED, query, 30, [7]), keyword_leg(conn, FEED, query, 30, None)

    for query in queries:
        scoped, fts5 = await db.read(lambda conn, q=query: both(conn, q))
        assert scoped and scoped.keys() == fts5.keys()
        for row_id, score in fts5.items():
            assert scoped[row_id] == pytest.approx(score, rel=1e-9)


async def test_fact_scopes_and_knowledge_labels_rank_with_their_own_statistics(db: Database) -> None:
    now = time.time()

    def add_facts(conn, scope: str, values: list[str]) -> None:
        for n, value in enumerate(values):
            conn.execute(
                "insert into facts(category, value, scope, hash, created_at, updated_at) values (?, ?, ?, ?, ?, ?)",
                ("life", value, scope, f"{scope}-{n}-{hash(value)}", now, now),
            )

    def add_knowledge(conn, label: str, texts: list[str]) -> None:
        for n, text in enumerate(texts):
            conn.execute(
                "insert into knowledge(source, path, text, hash, label, created_at, updated_at) "
                "values ('memory', ?, ?, ?, ?, ?, ?)",
                (f"{label}.md", text, f"{label}-{n}", label, now, now),
            )

    def rankings(conn) -> tuple[list, list]:
        facts = [
            [(f.id, f.score) for f in search_in_categories(conn, q, None, ["owner"], ["life"], DEFAULT_PARAMS)]
            for q in QUERIES
        ]
        knowledge = [list(keyword_leg(conn, KNOWLEDGE, q, 30, ["owner"]).items()) for q in QUERIES]
        return facts, knowledge

    await db.write(lambda conn: (add_facts(conn, "owner", CHAT[:8]), add_knowledge(conn, "owner", CHAT[:8])))
    before = await db.read(rankings)
    rng = random.Random(11)
    await db.write(
        lambda conn: (
            add_facts(conn, "chat:-100", noise(rng, 2_000)),
            add_knowledge(conn, "chat:-100", noise(rng, 2_000)),
        )
    )
    assert await db.read(rankings) == before
    facts_only_theirs = await db.read(lambda conn: keyword_leg(conn, FACTS, "lake roof", 30, ["chat:-100"]))
    assert facts_only_theirs and all(i > 8 for i in facts_only_theirs)  # and each scope finds only its own


async def test_a_message_stuffed_with_marker_characters_scores_as_without_them(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Word counts come from FTS5's highlight markers (\x01) in a large table; text carrying the marker itself
    # must not count as more matches.
    monkeypatch.setattr(local_bm25, "HIGHLIGHT_MIN_TABLE_ROWS", 0)

    # One message per chat, so no context column repeats a neighbour's words.
    def add(conn) -> list[int]:
        texts = ["roof \x01\x01\x01\x01 tiles", "roof tiles", *["garden"] * 6]
        return [add_messages(conn, 7 + n, [text])[0] for n, text in enumerate(texts)]

    stuffed, plain, *_ = await db.write(add)
    scores = await db.read(lambda conn: keyword_leg(conn, FEED, "roof", 30, list(range(7, 15))))
    assert set(scores) == {stuffed, plain}
    assert scores[stuffed] == pytest.approx(scores[plain])


def test_sqlite_varints_are_read_as_sqlite_writes_them() -> None:
    assert _varints(bytes([3, 0x81, 0x00, 0x7F])) == [3, 128, 127]
    assert _varints(bytes([0xFF] * 8 + [0x01])) == [(2**56 - 1) << 8 | 1]
    assert _row_length(bytes([3, 0x81, 0x00, 0x7F])) == 258 and _row_length(bytes([3, 4])) == 7


def test_the_most_common_words_are_dropped_first_and_the_rarest_always_stays() -> None:
    assert drop_common_terms({"paris": 3_000, "louvre": 10, "think": 4_000}, 5_000) == ["paris", "louvre"]
    assert drop_common_terms({"think": 9_000, "need": 8_000}, 5_000) == ["need"]
    assert drop_common_terms({"a": 1, "b": 2}, 5_000) == ["a", "b"]  # the query's order


async def test_a_long_pasted_log_ranks_exactly_as_fts5_bm25(db: Database) -> None:
    # A word's count in a row is read back from bm25(); a paste repeating it thousands of times is where the
    # inversion's float error would show.
    paste = "BEGIN\n" + "the worker restarted the lake pump again\n" * 5_000 + "END"
    await db.write(lambda conn: add_messages(conn, 7, [*CHAT, paste]))

    def both(conn, query: str) -> tuple[dict[int, float], dict[int, float]]:
        return keyword_leg(conn, FEED, query, 30, [7]), keyword_leg(conn, FEED, query, 30, None)

    for query in ["lake pump", "restarted the roof", "sunset lake"]:
        scoped, fts5 = await db.read(lambda conn, q=query: both(conn, q))
        assert scoped.keys() == fts5.keys() and len(scoped) > 1
        for row_id, score in fts5.items():
            assert scoped[row_id] == pytest.approx(score, rel=1e-9)


async def test_a_word_with_the_arabic_article_counts_once_in_either_form(db: Database) -> None:
    # An Arabic word is searched as its stem and its stem with "ال": two prefixes, one word.
    # One message per chat, so no context column repeats a neighbour's words.
    def add(conn) -> list[int]:
        texts = ["الكتاب جديد", "كتاب جديد", "كتاب الكتاب", "لا شيء"]
        return [add_messages(conn, 7 + n, [text])[0] for n, text in enumerate(texts)]

    with_article, without, both_forms, _ = await db.write(add)
    scores = await db.read(lambda conn: keyword_leg(conn, FEED, "كتاب", 30, list(range(7, 11))))
    assert set(scores) == {with_article, without, both_forms}
    assert scores[with_article] == pytest.approx(scores[without])
    assert scores[both_forms] > scores[without]


async def test_messages_arriving_during_a_search_never_break_it(db: Database) -> None:
    # The daemon archives while it searches, and each statement of a search reads the database as it is then:
    # 20 messages saying "lake" are committed by another connection as the statement that scores the word's
    # matches starts, after the scope's rows were counted.
    await db.write(lambda conn: add_messages(conn, 7, CHAT[:5]))
    reader, writer = connect(db.path, pick_driver()), connect(db.path, pick_driver())
    arrived = []

    def archive_meanwhile(sql: str) -> None:
        if "highlight(" in sql and not arrived:
            arrived.append(sql)
            for n in range(20):
                writer.execute(
                    "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (7, ?, 'x', ?, ?)",
                    (900 + n, 1_800_000_000 + n, f"the lake again, {n}"),
                )
            writer.commit()

    try:
        reader.set_trace_callback(archive_meanwhile)
        found = keyword_leg(reader, FEED, "lake", 30, [7])
        assert arrived and len(found) == 25  # the five of before (by their words or context) and the twenty
    finally:
        reader.close()
        writer.close()
