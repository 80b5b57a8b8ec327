"""Embedding a search query, where failure must degrade to keyword search rather than fail the search."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np
import structlog

from teleton.memory.embeddings.provider import EmbeddingProvider

log = structlog.get_logger(__name__)


def query_embedding(provider: EmbeddingProvider) -> Callable[[Sequence[str]], Awaitable[np.ndarray]]:
    """How ``provider`` embeds questions (and facts, which are compared with them symmetrically).

    A model trained with a question prefix (e5) embeds questions its own way; the others as any text.
    """
    return getattr(provider, "embed_queries", provider.embed)


async def embed_query(provider: EmbeddingProvider | None, text: str) -> np.ndarray | None:
    """The query's vector, or None (no provider, or it failed: the search then runs keyword-only)."""
    if provider is None or not text.strip():
        return None
    try:
        return (await query_embedding(provider)([text]))[0]
    except Exception as exc:  # a remote provider may be down; search must still answer
        log.warning("query_embedding_failed", error=str(exc), effect="keyword-only search")
        return None
