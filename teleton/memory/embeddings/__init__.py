"""Embedding providers behind one interface (``provider.EmbeddingProvider``) and the factory that picks one.

``create_provider(config.embedding)`` returns the configured provider, or None for ``none`` (keyword-only).
``with_cache(provider, db, config.embedding)`` wraps it in the SQLite embedding cache once the database is
open (the database needs the provider's model id and dimension first, to build the vector tables). The model
id includes the prompts when they are not the model's usual ones (``prompts.py``).
"""

from __future__ import annotations

from pathlib import Path

from teleton.config.schema import EmbeddingConfig
from teleton.memory.embeddings import model_files
from teleton.memory.embeddings.prompts import Prompts, resolve_prompts
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.storage.database import Database

__all__ = ["EmbeddingProvider", "create_provider", "with_cache"]


def create_provider(
    config: EmbeddingConfig, *, cache_dir: Path | None = None, hf_base_url: str | None = None
) -> EmbeddingProvider | None:
    """Build the provider named by ``config.provider`` (``local`` | ``anthropic`` | ``openai_compatible`` |
    ``none``).

    Loading the local model takes a fraction of a second of CPU: call it via ``asyncio.to_thread`` from
    async code.
    """
    kind, batch_size, model = config.provider, config.batch_size, config.model
    if kind == "none":
        return None
    if kind == "local":
        # Deferred: each provider loads its runtime (onnxruntime, an HTTP client) only when chosen
        from teleton.memory.embeddings.local import LocalEmbedder
        from teleton.memory.embeddings.local_strings import StringsEmbedder  # deferred: as above

        files = local_model_files(config, cache_dir=cache_dir, hf_base_url=hf_base_url)
        embedder = LocalEmbedder if files.tokenizer is not None else StringsEmbedder
        return embedder(files, prompts=local_prompts(config, files))
    if kind == "anthropic":
        from teleton.memory.embeddings.voyage import VoyageEmbedder  # deferred: as above

        return VoyageEmbedder(model or config.voyage_model, api_key=config.voyage_api_key, batch_size=batch_size)
    if kind == "openai_compatible":
        from teleton.memory.embeddings.openai_compatible import from_config  # deferred: as above

        return from_config(config, batch_size)
    raise ValueError(f"unknown embedding.provider {kind!r} (expected local, anthropic, openai_compatible or none)")


def local_model_files(
    config: EmbeddingConfig, *, cache_dir: Path | None = None, hf_base_url: str | None = None
) -> model_files.ModelFiles:
    """Which files the local provider loads: ``model_path``, else a packaged or Hugging Face ``model``, else
    the default packaged model."""
    # Deferred: the download path and the packaged models' files, for the local provider only
    from teleton.memory.embeddings import hf_download
    from teleton.memory.embeddings.packaged import packaged_model  # deferred: as above

    model_path, model = config.model_path, config.model
    if model_path:
        return model_files.directory_model(Path(model_path), model)
    if model is not None and model_files.packaged_id(model) is None:  # unset: the default, packaged
        return hf_download.cached_or_download(model, cache_dir, hf_base_url or hf_download.HF_BASE_URL)
    return packaged_model(model, cache_dir)


def local_prompts(config: EmbeddingConfig, files: model_files.ModelFiles) -> Prompts:
    """The local model's prompts (``prompts.resolve_prompts``), known by its id or its directory's name."""
    directory = Path(config.model_path).expanduser().name if config.model_path else None
    return resolve_prompts(config, [files.model_id, directory])


def with_cache(
    provider: EmbeddingProvider | None, db: Database, config: EmbeddingConfig | None = None
) -> EmbeddingProvider | None:
    """Wrap ``provider`` in the embedding cache (None stays None)."""
    if provider is None:
        return None
    # Deferred: a submodule importing this package; loaded once the provider exists
    from teleton.memory.embeddings.cached import CachedProvider

    config = config or EmbeddingConfig()
    return CachedProvider(provider, db, ttl_days=config.cache_ttl_days, max_entries=config.cache_max_entries)
