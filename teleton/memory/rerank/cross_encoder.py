"""A cross-encoder reranker: an ONNX model that reads a question and one text together and gives one logit,
how well the text answers the question (``memory.reranker.kind: cross_encoder``; docs/memory.md, Reranking).

Its files come from ``memory.reranker.model_path`` (a folder with ``model.onnx`` and ``tokenizer.json``) or a
Hugging Face id in ``memory.reranker.model`` that ``teleton setup`` downloads once into the model cache. Before
ONNX Runtime parses them they are checked: against ``memory.reranker.sha256`` where it names them, else, for a
download, against the ``SHA256SUMS`` recorded while the bytes arrived (a file changed since is refused); a
user's own folder without pins is checked for presence only. Pairs are tokenised with Hugging Face
``tokenizers`` (the hf extra) and scored in small length-sorted batches on one worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from teleton.config.schema import RerankerConfig
from teleton.memory.embeddings import hf_download
from teleton.memory.embeddings.local import HEAD_CHARS_PER_TOKEN, head, open_session
from teleton.memory.embeddings.model_files import ModelFiles, directory_model
from teleton.providers import extras
from teleton.providers.pinned_files import ModelFilesError, check_pinned
from teleton.text.lines import reason

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

MAX_TOKENS = 512  # question and text together; the position table of the BERT-sized cross-encoders
DEFAULT_BATCH = 16  # pairs per run, and at most TOKEN_BUDGET padded tokens: memory stays bounded
TOKEN_BUDGET = 1024  # padded tokens per batch (see token_batches)
# A text is cut to its head before tokenising: a 10 MB paste would otherwise be tokenised whole to keep 512.
CLIP_CHARS = MAX_TOKENS * HEAD_CHARS_PER_TOKEN
WHAT = "reranker model file"
SETUP_FIX = "run `teleton setup` to download it"


class RerankerFilesError(ModelFilesError):
    """A reranker file missing, unpinned or changed; ``reason`` and ``fix`` apart (``teleton doctor`` shows
    both), ``str(exc)`` the one line with the fix in parentheses."""

    def __init__(self, reason: str, fix: str) -> None:
        self.reason, self.fix = reason, fix
        super().__init__(f"{reason} ({fix})")


@dataclass(frozen=True)
class RerankerFiles(ModelFiles):
    """The model's files and the sums they must have. ``pinned`` (from ``memory.reranker.sha256``) is by file
    name; ``recorded`` is a download's ``SHA256SUMS``, by path inside ``folder`` (None: the user's own folder,
    which has none)."""

    folder: Path | None = None
    recorded: dict[str, str] | None = None

    def verify(self) -> None:
        """Each file present and hashing to its pin or recorded sum, else RerankerFilesError naming it.
        ``local.open_session`` calls this before ONNX Runtime reads a byte."""
        assert self.tokenizer is not None  # a cross-encoder always has its tokenizer.json
        for path in (self.onnx, self.tokenizer):
            expected, fix = self._expected(path)
            try:
                check_pinned(path, expected, WHAT)
            except ModelFilesError as exc:
                raise RerankerFilesError(str(exc), fix) from None

    def _expected(self, path: Path) -> tuple[str | None, str]:
        """The sum ``path`` must have (None: presence only) and the fix when it does not."""
        if path.name in self.pinned:
            return self.pinned[path.name], f"replace the file, or correct memory.reranker.sha256 for {path.name}"
        if self.recorded is None or self.folder is None:
            return None, "memory.reranker.model_path must be a folder holding model.onnx and tokenizer.json"
        fix = f"delete {self.folder} and {SETUP_FIX} again"
        expected = self.recorded.get(path.relative_to(self.folder).as_posix())
        if expected is None and path.is_file():  # not from our download, or its record was removed
            sums = self.folder / hf_download.SUMS_FILE
            raise RerankerFilesError(f"{WHAT}: {path} has no sum recorded in {sums}", fix)
        return expected, fix


def reranker_files(
    config: RerankerConfig, *, cache_dir: Path | None = None, hf_base_url: str | None = None, download: bool = True
) -> RerankerFiles:
    """Which files the reranker loads, with their sums (not yet checked: ``verify``). ``model_path`` wins;
    else the Hugging Face id ``model``, downloaded into ``cache_dir`` (default: the model cache) unless it is
    there already, or, with ``download=False``, RerankerFilesError saying to run `teleton setup`."""
    pins = {name: digest.strip().lower() for name, digest in config.sha256.items()}
    if config.model_path is not None:
        return _pinned(directory_model(Path(config.model_path), config.model), pins, None, None)
    if config.model is None:
        raise RerankerFilesError(
            "memory.reranker.kind is cross_encoder but no model is named",
            "set memory.reranker.model (a Hugging Face id) or memory.reranker.model_path",
        )
    model_id = config.model
    files = hf_download.cached(model_id, cache_dir)
    if files is None and not download:
        raise RerankerFilesError(f"reranker model {model_id} is not downloaded yet", SETUP_FIX)
    if files is None:
        base_url = hf_base_url or hf_download.HF_BASE_URL
        files = hf_download.cached_or_download(model_id, cache_dir, base_url, record_sums=True)
    folder = hf_download.model_dir(cache_dir or hf_download.default_cache_dir(), model_id)
    # No SHA256SUMS at all is treated as an empty one: every file is then refused as unrecorded.
    return _pinned(files, pins, folder, hf_download.recorded_sums(folder) or {})


def _pinned(
    files: ModelFiles, pins: dict[str, str], folder: Path | None, recorded: dict[str, str] | None
) -> RerankerFiles:
    assert files.tokenizer is not None  # directory_model always names its tokenizer.json
    names = (files.onnx.name, files.tokenizer.name)
    unknown = sorted(set(pins) - set(names))
    if unknown:  # a mistyped name would otherwise pin nothing, silently
        raise RerankerFilesError(
            f"memory.reranker.sha256 names {', '.join(unknown)}, which is not a file of the model",
            f"pin the files by name: {' and '.join(names)}",
        )
    return RerankerFiles(files.model_id, files.onnx, files.tokenizer, pins, folder=folder, recorded=recorded)


def require_tokenizers(model_id: str | None) -> None:
    """The hf extra's ``tokenizers`` reads the pairs: MissingExtra (one line naming the extra) without it."""
    extras.require("hf", f"the reranker {model_id or ''}".rstrip(), "tokenizers")


class CrossEncoder:
    """Relevance scores of (question, text) pairs from an ONNX cross-encoder: higher is more relevant."""

    def __init__(self, files: ModelFiles, *, batch_size: int = DEFAULT_BATCH, threads: int | None = None) -> None:
        require_tokenizers(files.model_id)  # said before anything loads
        if files.tokenizer is None:
            raise ModelFilesError(f"reranker {files.model_id} has no tokenizer.json")
        self._session = open_session(files, threads)  # verifies the files first (RerankerFiles.verify)
        self._inputs = {i.name for i in self._session.get_inputs()}
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "logits" if "logits" in outputs else outputs[0]
        if "input_ids" not in self._inputs:
            raise ModelFilesError(f"{files.onnx} is not a cross-encoder: it takes {', '.join(sorted(self._inputs))}")
        self._tokenizer = _pair_tokenizer(files.tokenizer)
        self.model_id = files.model_id
        self.batch_size = batch_size
        try:  # one pair now: a graph that wants other inputs or gives other outputs is refused at load
            self.scores("probe", ["probe"])
        except ModelFilesError:
            raise
        except Exception as exc:
            raise ModelFilesError(f"{files.onnx} is not a cross-encoder ({reason(exc, 200)})") from None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teleton-rerank")

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One float32 score per text, in the order of ``texts`` (synchronous: scripts and the worker)."""
        out = np.zeros(len(texts), dtype=np.float32)
        if not texts:
            return out
        question = _clip(query)
        encodings = self._tokenizer.encode_batch([(question, _clip(text)) for text in texts])
        lengths = [len(e.ids) for e in encodings]
        # Sorted by length so each batch pads to nearly its own width (as local.py does for embeddings).
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        for batch in token_batches(order, lengths, self.batch_size):
            out[batch] = self._run([encodings[i] for i in batch])
        return out

    async def ascores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """``scores`` on the reranker's own thread: the event loop never waits on the model, and two callers
        take turns instead of fighting over the same cores."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.scores, query, list(texts))

    def close(self) -> None:
        self._executor.shutdown(wait=False)

    def _run(self, encodings: Sequence[Encoding]) -> np.ndarray:
        width = max(1, max(len(e.ids) for e in encodings))
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            size = len(encoding.ids)
            ids[row, :size] = encoding.ids
            mask[row, :size] = 1
            types[row, :size] = encoding.type_ids  # 0 for the question, 1 for the text (BERT-style pairs)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        graph_feeds = {name: value for name, value in feeds.items() if name in self._inputs}
        logits = np.asarray(self._session.run([self._output], graph_feeds)[0], dtype=np.float32)
        return _relevance(logits, len(encodings))


def _relevance(logits: np.ndarray, rows: int) -> np.ndarray:
    """A score per pair: the one logit, or for a two-class head (not relevant, relevant) the second minus the
    first (the log-odds of "relevant", the order softmax would give)."""
    if logits.shape == (rows,):
        return logits
    if logits.ndim == 2 and logits.shape[0] == rows and logits.shape[1] == 1:
        return logits[:, 0]
    if logits.ndim == 2 and logits.shape[0] == rows and logits.shape[1] == 2:
        return logits[:, 1] - logits[:, 0]
    raise ModelFilesError(
        f"the reranker gives logits of shape {logits.shape} for {rows} pairs, not (batch,), (batch, 1) or (batch, 2)"
    )


def load_cross_encoder(
    config: RerankerConfig, *, cache_dir: Path | None = None, hf_base_url: str | None = None, download: bool = True
) -> CrossEncoder:
    """The configured cross-encoder, its files fetched (``download``) and checked first. Takes a moment of CPU
    (and the network, the first time): call it via ``asyncio.to_thread`` from async code."""
    require_tokenizers(config.model)  # before any download: without it the files would be of no use
    return CrossEncoder(reranker_files(config, cache_dir=cache_dir, hf_base_url=hf_base_url, download=download))


def _pair_tokenizer(path: Path) -> Tokenizer:
    from tokenizers import Tokenizer  # deferred: the hf extra, checked by require_tokenizers first

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ModelFilesError(f"{path} is not a tokenizer.json ({reason(exc, 200)})") from None
    # longest_first: the longer of question and text gives way, so a long question still leaves the text room.
    tokenizer.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
    tokenizer.no_padding()  # each batch is padded to its own longest pair (_run)
    return tokenizer


def _clip(text: str) -> str:
    # head() keeps a text with no space whole: the hard cut bounds that too.
    return head(text, CLIP_CHARS)[: 2 * CLIP_CHARS]


def token_batches(order: Sequence[int], lengths: Sequence[int], max_texts: int) -> list[list[int]]:
    """Split length-sorted ``order`` into batches of at most ``max_texts`` pairs and TOKEN_BUDGET padded tokens.

    Activation memory grows with batch x width (and attention with width^2): batches of 4,096 padded tokens
    peaked at +450 MB resident, 1,024 at +45 MB and ran twice as fast on 2 cores (cache-sized work).
    """
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = max(1, lengths[i])  # sorted ascending: this pair sets the batch's padded width
        if current and (len(current) >= max_texts or (len(current) + 1) * width > TOKEN_BUDGET):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
