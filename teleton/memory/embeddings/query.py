"""Embedding a search query, where failure must degrade to keyword search rather than fail the search."""

from __future__ import annotations

import numpy as np
import structlog

from teleton.memory.embeddings.provider import EmbeddingProvider

log = structlog.get_logger(__name__)


async def embed_query(provider: EmbeddingProvider | None, text: str) -> np.ndarray | None:
    """The query's vector, or None (no provider, or it failed: the search then runs keyword-only)."""
    if provider is None or not text.strip():
        return None
    # A model trained with a question prefix (e5) embeds questions its own way; the others as any text.
    embed = getattr(provider, "embed_queries", provider.embed)
    try:
        return (await embed([text]))[0]
    except Exception as exc:  # a remote provider may be down; search must still answer
        log.warning("query_embedding_failed", error=str(exc), effect="keyword-only search")
        return None
