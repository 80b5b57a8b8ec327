"""Embedding providers behind one interface (``provider.EmbeddingProvider``) and the factory that picks one.

``create_provider(config.embedding)`` returns the configured provider, or None for ``none`` (keyword-only).
``with_cache(provider, db, config.embedding)`` wraps it in the SQLite embedding cache once the database is
open (the database needs the provider's model id and dimension first, to build the vector tables).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teleton.memory.embeddings import model_files
from teleton.memory.embeddings.provider import EmbeddingProvider

__all__ = ["EmbeddingProvider", "create_provider", "with_cache"]


def create_provider(
    config: Any, *, cache_dir: Path | None = None, hf_base_url: str | None = None
) -> EmbeddingProvider | None:
    """Build the provider named by ``config.provider`` (``local`` | ``anthropic`` | ``openai_compatible`` |
    ``none``).

    Loading the local model takes a fraction of a second of CPU: call it via ``asyncio.to_thread`` from
    async code.
    """
    kind = (getattr(config, "provider", None) or "local").lower()
    batch_size = int(getattr(config, "batch_size", None) or 64)
    model = getattr(config, "model", None)
    if kind == "none":
        return None
    if kind == "local":
        from teleton.memory.embeddings.local import LocalEmbedder
        from teleton.memory.embeddings.local_strings import StringsEmbedder

        files = local_model_files(config, cache_dir=cache_dir, hf_base_url=hf_base_url)
        embedder = LocalEmbedder if files.tokenizer is not None else StringsEmbedder
        return embedder(files, batch_size=batch_size)
    if kind in ("anthropic", "voyage"):
        from teleton.memory.embeddings.voyage import VoyageEmbedder

        voyage_model = model or getattr(config, "voyage_model", None)
        return VoyageEmbedder(voyage_model, api_key=getattr(config, "voyage_api_key", None), batch_size=batch_size)
    if kind == "openai_compatible":
        from teleton.memory.embeddings.openai_compatible import from_config

        return from_config(config, batch_size)
    raise ValueError(f"unknown embedding.provider {kind!r} (expected local, anthropic, openai_compatible or none)")


def local_model_files(
    config: Any, *, cache_dir: Path | None = None, hf_base_url: str | None = None
) -> model_files.ModelFiles:
    """Which files the local provider loads: ``model_path``, else a packaged or Hugging Face ``model``, else
    the default packaged model."""
    from teleton.memory.embeddings import hf_download

    model_path = getattr(config, "model_path", None)
    model = getattr(config, "model", None)
    if model_path:
        return model_files.directory_model(Path(model_path), model)
    if model_files.packaged_id(model) is None:
        return hf_download.cached_or_download(model, cache_dir, hf_base_url or hf_download.HF_BASE_URL)
    return model_files.packaged_model(model, cache_dir)


def with_cache(provider: EmbeddingProvider | None, db: Any, config: Any = None) -> EmbeddingProvider | None:
    """Wrap ``provider`` in the embedding cache (None stays None)."""
    if provider is None:
        return None
    from teleton.memory.embeddings.cached import CachedProvider

    return CachedProvider(
        provider,
        db,
        ttl_days=float(getattr(config, "cache_ttl_days", None) or 60),
        max_entries=int(getattr(config, "cache_max_entries", None) or 50_000),
    )
