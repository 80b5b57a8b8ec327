"""Upgrading to multilingual-e5-small as the default: a database whose vectors came from all-MiniLM-L6-v2 (the
default before) is opened with today's default, as the daemon opens it at start. Both models give 384
dimensions, so only the model id tells the vectors apart: they are dropped, never searched against e5's
questions; search keeps answering by keyword while the rows are re-embedded in the background, as the daemon
does it; then every vector is e5's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from teleton.agent.deps import AgentSettings
from teleton.config.schema import Config
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.model_files import DEFAULT_MODEL_ID, MINILM_MODEL_ID
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.store import FactStore
from teleton.memory.feed.embedding import FeedEmbedder, embed_pending
from teleton.memory.feed.search import search_feed
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.reembed import embed_pending_facts
from teleton.storage import Database
from tests.conftest import requires_extra
from tests.waiting import until

pytestmark = requires_extra("minilm")  # the database being upgraded holds MiniLM's vectors

CHAT = 3
MESSAGES = ["the garage code is 4512", "thanks, I'll let the plumber in tomorrow", "ok"]
FACT = Fact("prefers green tea over coffee", category="preference", key="drink", subject="owner")
NOTE = "# Car\n\nThe car is booked for its yearly inspection on 14 March at the garage on Elm Street.\n"


async def _pending(db: Database) -> dict[str, int]:
    counts = {}
    for table in ("tg_messages", "facts", "knowledge"):
        counts[table] = (await db.fetchone(f"select count(*) from {table} where embedded = 0"))[0]
    return counts


async def _vectors(db: Database) -> dict[str, int]:
    counts = {}
    for table in ("tg_messages_vec16", "facts_vec", "knowledge_vec"):
        counts[table] = (await db.fetchone(f"select count(*) from {table}"))[0]
    return counts


async def _minilm_database(path: Path, workspace: Path, messages: list[str] = MESSAGES) -> None:
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "car.md").write_text(NOTE)
    minilm = LocalEmbedder(packaged_model("all-MiniLM-L6-v2"))
    db = await Database.open(path, embedding=(minilm.model_id, minilm.dims))
    try:
        await db.write(
            lambda conn: conn.executemany(
                "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (?, ?, ?, ?, ?)",
                [(CHAT, n + 1, "Anna", 1_700_000_000.0 + 30 * n, text) for n, text in enumerate(messages)],
            )
        )
        assert await embed_pending(db, minilm) == len(messages)
        await FactStore(db, minilm).save(FACT)
        await KnowledgeIndex(db, workspace, minilm).reindex()
        assert await _vectors(db) == {"tg_messages_vec16": len(messages), "facts_vec": 1, "knowledge_vec": 1}
    finally:
        await db.close()
        minilm.close()


async def test_a_minilm_database_is_reembedded_with_the_default_and_searchable_meanwhile(
    tmp_path: Path, embedder: LocalEmbedder
) -> None:
    assert embedder.model_id == DEFAULT_MODEL_ID != MINILM_MODEL_ID and embedder.dims == 384
    path, workspace = tmp_path / "teleton.db", tmp_path / "workspace"
    await _minilm_database(path, workspace)

    db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))  # the daemon's start, upgraded
    try:
        assert db.info.vectors_reset
        assert await _vectors(db) == {"tg_messages_vec16": 0, "facts_vec": 0, "knowledge_vec": 0}
        assert await _pending(db) == {"tg_messages": 3, "facts": 1, "knowledge": 1}

        # Meanwhile: the keyword leg answers, and no MiniLM vector is ever compared with an e5 question.
        hits = await search_feed(db, "what is the garage code?", chat_ids=[CHAT], provider=embedder)
        assert hits[0].text == MESSAGES[0] and hits[0].vector_score == 0 and hits[0].keyword_score > 0
        facts = FactStore(db, embedder)
        assert [f.value for f in await facts.recall("green tea", ["owner"])] == [FACT.value]

        # The background catch-up, as the daemon runs it: the feed worker, the facts task, the knowledge
        # re-index at start.
        worker = FeedEmbedder(db, embedder, interval=3600)
        worker.start()
        try:
            reembed_facts = asyncio.create_task(embed_pending_facts(db, embedder))
            knowledge = KnowledgeIndex(db, workspace, embedder)
            await knowledge.reindex()
            assert await reembed_facts == 1
            await until(lambda: _caught_up(db))
        finally:
            await worker.stop()
        assert await _vectors(db) == {"tg_messages_vec16": 3, "facts_vec": 1, "knowledge_vec": 1}

        # Every vector is now e5's: the fact's is the one saving it under the default model stores.
        assert await _fact_vector(db) @ await _fact_vector_saved_with(embedder, tmp_path / "fresh.db") > 0.999
        hits = await search_feed(db, "door code for the garage", chat_ids=[CHAT], provider=embedder)
        assert hits[0].text == MESSAGES[0] and hits[0].vector_score > 0
        found = await knowledge.search("when is the car's yearly check?", labels=None)
        assert found and found[0].vector_score > 0
    finally:
        await db.close()


async def test_meanwhile_a_search_finds_what_the_keyword_leg_finds(tmp_path: Path, embedder: LocalEmbedder) -> None:
    messages = ["the garage code is 4512", "the garage door is stuck again", "I parked in the garage",
                "garage sale on Saturday", "the gym code changed", "lunch at noon?"]  # fmt: skip
    await _minilm_database(tmp_path / "teleton.db", tmp_path / "workspace", messages)
    db = await Database.open(tmp_path / "teleton.db", embedding=(embedder.model_id, embedder.dims))
    try:
        params = AgentSettings.from_config(Config()).context.params  # a turn's, with the default model's weights
        searched = await search_feed(db, "garage code", chat_ids=[CHAT], provider=embedder, params=params)
        keyword_only = await search_feed(db, "garage code", chat_ids=[CHAT], provider=None, params=params)
        assert len(keyword_only) == 6  # "lunch at noon?" too, through the message before it
        assert [h.text for h in searched] == [h.text for h in keyword_only]
    finally:
        await db.close()


async def _fact_vector(db: Database) -> np.ndarray:
    return np.frombuffer((await db.fetchone("select embedding from facts_vec"))[0], np.float32)


async def _fact_vector_saved_with(embedder: LocalEmbedder, path: Path) -> np.ndarray:
    db = await Database.open(path, embedding=(embedder.model_id, embedder.dims))
    try:
        await FactStore(db, embedder).save(FACT)
        return await _fact_vector(db)
    finally:
        await db.close()


async def _caught_up(db: Database) -> bool:
    return (await _pending(db))["tg_messages"] == 0
