"""`teleton setup`'s step for the memory reranker: when ``memory.reranker.kind`` is ``cross_encoder``, its files
are downloaded (the first time) and the model loaded once, so the daemon's first start needs no network for it
and a wrong file is said now, in one line, rather than in the daemon's log."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from teleton.config.schema import Config
from teleton.text.lines import reason


def prepare_reranker(
    config: Config, console: Console, *, cache_dir: Path | None = None, hf_base_url: str | None = None
) -> bool:
    """Download and load the configured cross-encoder once; one line either way (``teleton doctor`` says more
    of a failure). Whether it is ready; True when no reranker is configured."""
    reranker = config.memory.reranker
    if reranker.kind != "cross_encoder":
        return True
    from teleton.memory.rerank.cross_encoder import load_cross_encoder  # deferred: onnxruntime, when configured

    started = time.perf_counter()
    try:
        model = load_cross_encoder(reranker, cache_dir=cache_dir, hf_base_url=hf_base_url)
    except Exception as exc:  # a download, a file or the extra: each says itself in its first line
        console.print(f"[yellow]reranker not ready:[/] {escape(reason(exc, 200))} (`teleton doctor` says more)")
        return False
    model.close()
    console.print(f"[green]reranker[/] {escape(model.model_id)} ready ({time.perf_counter() - started:.1f} s)")
    return True
