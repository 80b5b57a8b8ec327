"""A second look at a memory search's best candidates: a cross-encoder reads the question and each text
together and scores how well the text answers it (``cross_encoder.py``; off by default, docs/memory.md)."""

from __future__ import annotations

import asyncio

import structlog

from teleton.config.schema import RerankerConfig
from teleton.memory.recall import Reranker
from teleton.providers.extras import MissingExtra
from teleton.providers.pinned_files import ModelFilesError

log = structlog.get_logger(__name__)


async def configured_reranker(config: RerankerConfig) -> Reranker | None:
    """The configured cross-encoder (``teleton setup`` downloads it), or None: off, or not loadable, said once
    in the log with why; memory then searches as without it. The daemon and `teleton feed search` load it."""
    if config.kind == "off":
        return None
    # Deferred: ONNX Runtime and tokenizers load only when a reranker is configured
    from teleton.memory.rerank.cross_encoder import load_cross_encoder

    try:
        return await asyncio.to_thread(load_cross_encoder, config, download=False)
    except (ModelFilesError, MissingExtra) as exc:
        log.warning("reranker_unavailable", reason=str(exc))
        return None
