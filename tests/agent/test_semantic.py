"""With the real local embedding model: retrieval by meaning, one query vector per message."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from teleton.agent.prompt.memory import KNOWLEDGE_HEADER
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.search.corpora import KNOWLEDGE
from teleton.memory.search.vector_store import write_vectors
from teleton.storage import Database
from tests.agent.conftest import build_harness
from tests.fakes.anthropic_server import FakeAnthropic, Reply, text, tool_use, user_said


class CountingEmbedder:
    """The real model, counting how many texts it was asked to embed."""

    def __init__(self, inner: LocalEmbedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dims = inner.dims
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str]):  # type: ignore[no-untyped-def]
        self.calls.append(list(texts))
        return await self.inner.embed(texts)


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    return LocalEmbedder(packaged_model())


async def test_paraphrase_finds_the_chunk_and_one_embedding_serves_the_turn(
    tmp_path: Path, fake_api: FakeAnthropic, model: LocalEmbedder
) -> None:
    embedder = CountingEmbedder(model)
    db = await Database.open(tmp_path / "t.db", embedding=(embedder.model_id, embedder.dims))
    assert db.vectors
    chunk = "The lake cabin wifi password is pinecone42."
    now = time.time()
    row = await db.execute(
        "insert into knowledge(source, path, heading, text, hash, created_at, updated_at) "
        "values ('memory', 'MEMORY.md', '', ?, 'h', ?, ?)",
        (chunk, now, now),
    )
    vector = (await model.embed([chunk]))[0]
    await db.write(lambda conn: write_vectors(conn, KNOWLEDGE, [(row, "memory", vector)]))
    h = await build_harness(tmp_path, db, fake_api)
    h.agent.context.embedder = embedder
    h.agent.tool_deps.embedder = embedder
    h.agent.deps.facts.embedder = embedder
    tool_rag_vectors = []

    async def selector(query, vector, chat, is_admin, is_owner, offered):  # type: ignore[no-untyped-def]
        tool_rag_vectors.append(vector)
        return None

    h.agent.deps.tool_selector = selector
    question = "How can I connect to the internet at the lake house?"
    await h.dm(question)
    block = h.fake.requests[-1]["messages"][-1]["content"][0]["text"]
    assert block.startswith(KNOWLEDGE_HEADER) and "pinecone42" in block  # no keyword in common
    assert embedder.calls == [[question]]  # one embedding for the message ...
    assert tool_rag_vectors[0] is not None  # ... handed to tool RAG too
    # Facts saved through the tool get a vector, so recall works by meaning as well.

    def obedient(body: dict) -> Reply:
        said = user_said(body)
        if said == "save it":
            return tool_use(("memory_save", {"value": "My kitty is called Whiskerino"}))
        if said == "recall":
            return tool_use(("memory_recall", {"query": "cat name"}))
        return text("ok")

    h.main = obedient
    await h.dm("save it")
    assert (await db.fetchone("select count(*) from facts_vec"))[0] == 1
    await h.dm("recall")
    results = [b for b in h.fake.requests[-1]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert "Whiskerino" in results[0]["content"]  # "cat name" vs "kitty is called": found by meaning
    await h.llm.close()
    await db.close()
