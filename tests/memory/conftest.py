"""Fixtures of the memory engine tests: the real ONNX model, real SQLite files with sqlite-vec."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.packaged import packaged_model
from teleton.storage import Database
from tests.conftest import DatabaseTemplates


class CountingProvider:
    """A real provider wrapper that counts what reaches the model (and can present another model id)."""

    def __init__(self, inner: LocalEmbedder, model_id: str | None = None) -> None:
        self.inner = inner
        self.model_id = model_id or inner.model_id
        self.dims = inner.dims
        self.calls = 0
        self.texts = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return await self.inner.embed(texts)


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(packaged_model())


@pytest.fixture
def counting(embedder: LocalEmbedder) -> CountingProvider:
    return CountingProvider(embedder)


@pytest.fixture
async def mdb(
    tmp_path: Path, embedder: LocalEmbedder, database_templates: DatabaseTemplates
) -> AsyncIterator[Database]:
    """A database whose vector tables are built for the local model."""
    database = await database_templates.open(tmp_path / "memory.db", embedding=(embedder.model_id, embedder.dims))
    yield database
    await database.close()
