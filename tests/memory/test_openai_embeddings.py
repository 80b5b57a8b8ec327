"""Embeddings from an OpenAI-compatible server (Ollama, OpenAI, LM Studio...) over real HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from teleton.config.schema import EmbeddingConfig
from teleton.memory.embeddings import create_provider
from teleton.memory.embeddings.openai_compatible import (
    EmbeddingEndpointError,
    OpenAICompatibleEmbedder,
    endpoint_of,
)
from teleton.memory.reembed import reembed_all
from teleton.memory.search.corpora import FACTS
from teleton.memory.search.hybrid import hybrid_search
from teleton.storage import Database
from tests.fakes.openai_embeddings import FakeEmbeddings

FACTS_ROWS = [
    ("drink", "prefers green tea over coffee"),
    ("pet", "has a cat called Whiskerino"),
    ("city", "lives in Lisbon near the river"),
]


@pytest.fixture
def fake() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dims={"nomic-embed-text": 32, "mxbai-embed-large": 48}) as server:
        yield server


def config(fake: FakeEmbeddings, model: str = "nomic-embed-text", **extra: object) -> EmbeddingConfig:
    return EmbeddingConfig(provider="openai_compatible", base_url=fake.base_url, model=model, batch_size=2, **extra)


def add_facts(conn: object) -> None:
    for i, (key, value) in enumerate(FACTS_ROWS):
        conn.execute(  # type: ignore[attr-defined]
            "insert into facts(category, key, value, scope, hash, created_at, updated_at) "
            "values ('preference', ?, ?, 'user', ?, 0, 0)",
            (key, value, f"h{i}"),
        )


async def test_vectors_are_stored_in_batches_and_found_by_vector(tmp_path: Path, fake: FakeEmbeddings) -> None:
    provider = create_provider(config(fake))
    assert isinstance(provider, OpenAICompatibleEmbedder)
    # The server and the model; nomic-embed-text's own prompts add their digest (test_embedding_prompts.py).
    assert provider.model_id.startswith(f"127.0.0.1:{fake.port}:nomic-embed-text+prompts:") and provider.dims == 32
    db = await Database.open(tmp_path / "m.db", embedding=(provider.model_id, provider.dims))
    try:
        await db.write(add_facts)
        assert (await reembed_all(db, provider))["facts"] == 3
        assert all(len(body["input"]) <= 2 for body in fake.requests)  # batch_size honoured
        assert (await db.fetchone("select count(*) from facts_vec"))[0] == 3
        vector = (await provider.embed(["the cat Whiskerino"]))[0]
        hits = await db.read(lambda conn: hybrid_search(conn, FACTS, "zzz", vector, scope=["user"]))
        assert hits and "Whiskerino" in hits[0].text and hits[0].vector_score > 0 and hits[0].keyword_score == 0
    finally:
        await db.close()
        await provider.aclose()


async def test_a_model_change_reembeds_everything(tmp_path: Path, fake: FakeEmbeddings) -> None:
    first = create_provider(config(fake))
    db = await Database.open(tmp_path / "m.db", embedding=(first.model_id, first.dims))
    await db.write(add_facts)
    await reembed_all(db, first)
    await db.close()

    second = create_provider(config(fake, "mxbai-embed-large"))
    assert second is not None and second.dims == 48 and second.model_id != first.model_id
    fake.requests.clear()
    db = await Database.open(tmp_path / "m.db", embedding=(second.model_id, second.dims))
    try:
        assert (await db.fetchone("select count(*) from facts where embedded = 0"))[0] == 3
        assert (await reembed_all(db, second))["facts"] == 3
        assert {body["model"] for body in fake.requests} == {"mxbai-embed-large"}
        sent = " | ".join(fake.texts())
        assert len(fake.texts()) == 3 and all(value in sent for _, value in FACTS_ROWS)
    finally:
        await db.close()


async def test_rate_limits_and_server_errors_are_retried(fake: FakeEmbeddings) -> None:
    provider = OpenAICompatibleEmbedder("nomic-embed-text", base_url=fake.base_url, max_wait=0.01)
    fake.failures = [429, 503]
    vectors = await provider.embed(["tea", "cat"])
    assert vectors.shape == (2, 32) and len(fake.requests) == 4  # probe, 429, 503, success
    fake.failures = [429] * 5
    with pytest.raises(Exception, match="429"):
        await provider.embed(["tea"])
    await provider.aclose()


def test_a_refused_key_is_one_line(fake: FakeEmbeddings) -> None:
    fake.key = "right"
    with pytest.raises(EmbeddingEndpointError) as caught:
        create_provider(config(fake, api_key="wrong"))
    message = str(caught.value)
    assert "\n" not in message and "HTTP 401" in message and "embedding.api_key" in message
    fake.key = None


def test_the_key_is_sent_when_given(fake: FakeEmbeddings) -> None:
    fake.key = "right"
    provider = create_provider(config(fake, api_key="right"))
    assert provider is not None and provider.dims == 32


def test_presets_give_the_url_and_the_key_variable() -> None:
    ollama = EmbeddingConfig(provider="openai_compatible", preset="ollama")
    assert endpoint_of(ollama, env={}) == ("http://127.0.0.1:11434/v1", None, "ollama")
    openai = EmbeddingConfig(provider="openai_compatible", preset="openai")
    assert endpoint_of(openai, env={"OPENAI_API_KEY": "sk"}) == ("https://api.openai.com/v1", "sk", "openai")
    with pytest.raises(EmbeddingEndpointError, match="OPENAI_API_KEY"):
        endpoint_of(openai, env={})
    with pytest.raises(EmbeddingEndpointError, match=r"embedding\.base_url"):
        endpoint_of(EmbeddingConfig(provider="openai_compatible"), env={})
    with pytest.raises(EmbeddingEndpointError, match=r"embedding\.model"):
        create_provider(EmbeddingConfig(provider="openai_compatible", preset="ollama"))
