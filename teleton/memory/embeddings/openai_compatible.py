"""The ``openai_compatible`` provider: ``POST {base_url}/embeddings`` on any server speaking OpenAI's API.

OpenAI itself, and local servers (Ollama, LM Studio, vLLM, llama.cpp) that embed with a model the user
pulled. Plain httpx like ``voyage.py``, so the memory layer needs no model SDK. Where the server is comes
from ``embedding.base_url`` or a named preset of ``teleton.config.presets`` (``embedding.preset: ollama``); the
key from ``embedding.api_key`` or the preset's environment variable, and none is sent to a server that
needs none.

The vector dimension is not known in advance (it depends on the model the server has loaded): the provider
embeds one probe text when it is built, so the database can build its vector tables. The model id names the
server as well as the model, so ``nomic-embed-text`` on two servers never shares an index or cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from teleton.config.presets import PresetError, service_endpoint
from teleton.config.schema import EmbeddingConfig
from teleton.memory.embeddings.prompts import Prompts, resolve_prompts, vector_identity, with_prompt
from teleton.providers.http_retry import embed_in_batches, http_retrying, http_retrying_sync, unit_rows

MAX_BATCH = 256


class EmbeddingEndpointError(RuntimeError):
    """A problem the user fixes in the config or on the server, worded as one line."""


def endpoint_of(config: EmbeddingConfig, env: Mapping[str, str] | None = None) -> tuple[str, str | None, str]:
    """(base URL, key or None, label) from ``config.embedding``; the label prefixes the model id."""
    try:
        example = "e.g. http://127.0.0.1:11434/v1, or name a preset with embedding.preset: ollama"
        base_url, key, found = service_endpoint(
            "embedding",
            name=config.preset,
            base_url=config.base_url,
            api_key=config.api_key,
            example=example,
            env=env,
        )
    except PresetError as exc:
        raise EmbeddingEndpointError(str(exc)) from None
    return base_url, key, found.name if found else urlsplit(base_url).netloc


def one_line(exc: httpx.HTTPStatusError, base_url: str) -> EmbeddingEndpointError:
    """The failure a user can act on, instead of a traceback."""
    status = exc.response.status_code
    if status in (401, 403):
        return EmbeddingEndpointError(
            f"embeddings at {base_url} refused the key (HTTP {status}): check embedding.api_key or its variable"
        )
    if status == 404:
        return EmbeddingEndpointError(
            f"embeddings at {base_url}: model or endpoint not found (HTTP 404): check embedding.model "
            "(for Ollama: ollama pull <model>)"
        )
    return EmbeddingEndpointError(f"embeddings at {base_url} failed: HTTP {status} {exc.response.text[:200]}")


class OpenAICompatibleEmbedder:
    """An :class:`EmbeddingProvider` over an OpenAI-style ``/embeddings`` endpoint."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        label: str | None = None,
        batch_size: int = 64,
        attempts: int = 5,
        max_wait: float = 20.0,
        dims: int | None = None,
        prompts: Prompts | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        prompts = prompts or Prompts()
        self.query_prompt, self.document_prompt = prompts.query, prompts.document
        # The prompts go on the texts here, before they are sent; vectors made before prompts existed had none.
        self.model_id = vector_identity(f"{label or urlsplit(self.base_url).netloc}:{model}", prompts)
        self.batch_size = max(1, min(batch_size, MAX_BATCH))
        self._attempts = attempts
        self._max_wait = max_wait
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=httpx.Timeout(60.0))
        self.dims = dims or self._probe_dims()

    def _probe_dims(self) -> int:
        """Embed one text synchronously (the provider is built in a worker thread) to learn the dimension."""
        try:
            with httpx.Client(base_url=self.base_url, headers=self._headers, timeout=httpx.Timeout(60.0)) as client:
                for attempt in http_retrying_sync(self._attempts, self._max_wait):
                    with attempt:
                        response = client.post("/embeddings", json={"input": ["probe"], "model": self.model})
                        self._raise_for_status(response)
        except httpx.HTTPStatusError as exc:
            raise one_line(exc, self.base_url) from None
        except httpx.TransportError as exc:
            raise EmbeddingEndpointError(f"embeddings at {self.base_url} unreachable ({exc})") from None
        return int(self._vectors(response.json(), 1).shape[1])

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Texts to be stored, each after the document prompt."""
        return await self._embed(with_prompt(self.document_prompt, texts))

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Questions, each after the query prompt."""
        return await self._embed(with_prompt(self.query_prompt, texts))

    async def _embed(self, texts: list[str]) -> np.ndarray:
        return await embed_in_batches(texts, self.batch_size, self.dims, self._embed_batch)

    async def _embed_batch(self, texts: list[str]) -> np.ndarray:
        async for attempt in http_retrying(self._attempts, self._max_wait):
            with attempt:
                response = await self._client.post("/embeddings", json={"input": texts, "model": self.model})
                self._raise_for_status(response)
        vectors = self._vectors(response.json(), len(texts))
        if vectors.shape[1] != self.dims:
            raise EmbeddingEndpointError(
                f"embeddings at {self.base_url} returned {vectors.shape[1]}-dim vectors, expected {self.dims} "
                "(the server's model changed: restart Teleton to re-embed)"
            )
        return vectors

    def _raise_for_status(self, response: httpx.Response) -> None:
        try:
            response.raise_for_status()
        except httpx.HTTPStatusError as exc:
            # Transient ones go back to the retry loop; the rest become one line for the user.
            if exc.response.status_code == 429 or exc.response.status_code >= 500:
                raise
            raise one_line(exc, self.base_url) from None

    def _vectors(self, body: dict[str, Any], count: int) -> np.ndarray:
        data = sorted(body.get("data", []), key=lambda item: item["index"])
        if len(data) != count:
            raise EmbeddingEndpointError(f"embeddings at {self.base_url}: {len(data)} vectors for {count} texts")
        return unit_rows(np.asarray([item["embedding"] for item in data], dtype=np.float32))

    async def aclose(self) -> None:
        await self._client.aclose()


def from_config(config: EmbeddingConfig, batch_size: int, attempts: int = 5) -> OpenAICompatibleEmbedder:
    model = config.model
    if not model:
        raise EmbeddingEndpointError("embedding.model: required for provider openai_compatible (e.g. nomic-embed-text)")
    base_url, key, label = endpoint_of(config)
    prompts = resolve_prompts(config, [model])
    return OpenAICompatibleEmbedder(
        model, base_url=base_url, api_key=key, label=label, batch_size=batch_size, attempts=attempts, prompts=prompts
    )
