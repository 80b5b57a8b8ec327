"""The ``anthropic`` provider: Voyage AI embeddings, the service Anthropic documents for embeddings.

HTTPS through httpx (async, so it needs no worker thread), the key from ``VOYAGE_API_KEY``, texts sent in
batches, and transient failures (429, 5xx, network errors) retried with exponential back-off by tenacity.
Voyage returns unit-length vectors; they are normalised again anyway, since the index assumes it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import httpx
import numpy as np

from teleton.providers.http_retry import embed_in_batches, http_retrying, unit_rows

VOYAGE_URL = "https://api.voyageai.com/v1"
DEFAULT_MODEL = "voyage-3.5-lite"
# Output dimensions of Voyage's text models (the index needs the dimension before the first call).
MODEL_DIMS = {
    "voyage-3.5": 1024,
    "voyage-3.5-lite": 1024,
    "voyage-3-large": 1024,
    "voyage-3": 1024,
    "voyage-3-lite": 512,
    "voyage-code-3": 1024,
    "voyage-finance-2": 1024,
    "voyage-law-2": 1024,
}
MAX_BATCH = 128


class VoyageError(RuntimeError):
    pass


class VoyageEmbedder:
    """An :class:`EmbeddingProvider` over the Voyage AI embeddings endpoint."""

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str = VOYAGE_URL,
        batch_size: int = MAX_BATCH,
        attempts: int = 5,
        max_wait: float = 20.0,
        dims: int | None = None,
    ) -> None:
        self.model = model or DEFAULT_MODEL
        key = api_key or os.environ.get("VOYAGE_API_KEY")
        if not key:
            raise VoyageError("embedding.provider 'anthropic' needs the VOYAGE_API_KEY environment variable")
        if dims is None and self.model not in MODEL_DIMS:
            raise VoyageError(f"unknown Voyage model {self.model!r}: its dimension is not known")
        self.dims = dims or MODEL_DIMS[self.model]
        self.model_id = f"voyage:{self.model}"
        self.batch_size = max(1, min(batch_size, MAX_BATCH))
        self._attempts = attempts
        self._max_wait = max_wait
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(30.0),
        )

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await embed_in_batches(texts, self.batch_size, self.dims, self._embed_batch)

    async def _embed_batch(self, texts: list[str]) -> np.ndarray:
        async for attempt in http_retrying(self._attempts, self._max_wait):
            with attempt:
                response = await self._client.post(
                    "/embeddings", json={"input": texts, "model": self.model, "truncation": True}
                )
                response.raise_for_status()
        return self._parse(response.json(), len(texts))

    def _parse(self, body: dict, count: int) -> np.ndarray:
        data = sorted(body.get("data", []), key=lambda item: item["index"])
        if len(data) != count:
            raise VoyageError(f"Voyage returned {len(data)} embeddings for {count} texts")
        vectors = np.asarray([item["embedding"] for item in data], dtype=np.float32)
        if vectors.shape[1] != self.dims:
            raise VoyageError(f"Voyage returned {vectors.shape[1]}-dim vectors, expected {self.dims}")
        return unit_rows(vectors)

    async def aclose(self) -> None:
        await self._client.aclose()
