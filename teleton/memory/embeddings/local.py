"""The default provider: a sentence-transformers model in ONNX Runtime, on this machine, offline.

Texts are tokenised with ``tokenizers`` (Rust), each run through the ONNX graph alone, mean-pooled over the
attention mask and L2-normalised. Alone, because e5's int8 graph quantizes each input by the range of the
whole batch, padding included: batched, a text's vector depended on its neighbours (cosine down to 0.97 with
itself). Runs are single-threaded and as many go at once as there are cores, within about a tenth of the
speed of batches on two threads (docs/benchmarks.md). Questions have a thread of their own, so a turn's question never
waits behind a batch of archived messages; nothing runs on the event loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from teleton.memory.embeddings.e5_tokenizer import MAX_TOKENS as E5_MAX_TOKENS
from teleton.memory.embeddings.e5_tokenizer import E5Tokenizer
from teleton.memory.embeddings.model_files import ModelFiles
from teleton.memory.embeddings.prompts import Prompts, vector_identity, with_prompt
from teleton.process.threads import cores
from teleton.providers.pinned_files import ModelFilesError
from teleton.text.lines import reason

MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256-token inputs; longer text is truncated
HEAD_CHARS_PER_TOKEN = 8  # a long text's first head, in characters per token of the window (see by_heads)


class OnWorkerThread:
    """What both local models share: texts to be stored are run one per thread on ``threads`` threads (every
    core by default), questions on a thread of their own; the document prompt goes before every text to be
    stored and the query prompt before every question (``prompts``)."""

    _runs: ThreadPoolExecutor
    _questions: ThreadPoolExecutor
    model_id: str
    dims: int  # set at start from a probe text
    query_prompt = ""
    document_prompt = ""

    def __init__(
        self,
        files: ModelFiles,
        *,
        threads: int | None = None,
        prompts: Prompts | None = None,
    ) -> None:
        """The model loaded (``_load``, each run on one thread), then ``prompts`` (None: the files' baseline)
        and the model id the vectors they make are known by, the vector size (one probe text), and the
        threads: ``threads`` runs at once (default: the cores), and one for questions."""
        self._load(files)
        if prompts is None:
            prompts = Prompts(*files.baseline_prompts)
        self.query_prompt, self.document_prompt = prompts.query, prompts.document
        self.model_id = vector_identity(files.model_id, prompts, files.baseline_prompts)
        self.dims = int(self._run_one("probe").shape[0])
        self._runs = ThreadPoolExecutor(max_workers=threads or cores(), thread_name_prefix="teleton-embed")
        self._questions = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teleton-embed-question")

    def _load(self, files: ModelFiles) -> None:
        """Open the model, single-threaded: what ``_run_one`` runs on."""
        raise NotImplementedError

    def _run_one(self, text: str) -> np.ndarray:
        """The model's vector of ``text`` as it is, no prompt added."""
        raise NotImplementedError

    def _encode(self, texts: Sequence[str], runs: ThreadPoolExecutor | None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        if runs is None or len(texts) == 1:
            return np.stack([self._run_one(t) for t in texts]).astype(np.float32)
        # Longest first: the last run to start is a short one, so the threads finish together.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors = dict(zip(order, runs.map(self._run_one, [texts[i] for i in order]), strict=True))
        return np.stack([vectors[i] for i in range(len(texts))]).astype(np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Synchronous embedding of texts to be searched (for scripts; ``embed`` calls it off the loop)."""
        return self._encode(with_prompt(self.document_prompt, texts), self._runs)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(with_prompt(self.query_prompt, texts), None)

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.to_thread(self.encode, list(texts))

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._questions, self.encode_queries, list(texts))

    def close(self) -> None:
        self._runs.shutdown(wait=False)
        self._questions.shutdown(wait=False)


class LocalEmbedder(OnWorkerThread):
    """An :class:`EmbeddingProvider` over an ONNX sentence-embedding model."""

    def _load(self, files: ModelFiles) -> None:
        files.require_tokenizer()  # a missing extra is said before anything loads
        self._session = open_session(files, 1)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._token_ids = _tokenizer(files)
        self._center = np.load(files.center) if files.center is not None else None

    def _run_one(self, text: str) -> np.ndarray:
        ids = np.array([self._token_ids([text])[0] or [0]], dtype=np.int64)
        mask = np.ones_like(ids)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        vector = mean_pool_normalise(hidden, mask)[0]
        if self._center is None:
            return vector
        centred = vector - self._center
        return (centred / max(float(np.linalg.norm(centred)), 1e-12)).astype(np.float32)


def _tokenizer(files: ModelFiles) -> Callable[[list[str]], list[list[int]]]:
    """Texts -> token ids: a Hugging Face ``tokenizer.json``, or e5's SentencePiece model."""
    if files.tokenizer is not None and files.tokenizer.suffix == ".model":
        return by_heads(E5Tokenizer(files.tokenizer).ids, E5_MAX_TOKENS)
    from tokenizers import Tokenizer  # deferred: only models with a tokenizer.json use Hugging Face tokenizers

    try:
        tokenizer = Tokenizer.from_file(str(files.tokenizer))
    except Exception as exc:
        raise ModelFilesError(f"{files.tokenizer} is not a tokenizer.json ({reason(exc, 200)})") from None
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()  # we pad per batch ourselves, to the batch's own longest text
    return by_heads(lambda texts: [e.ids for e in tokenizer.encode_batch(texts)], MAX_TOKENS)


def by_heads(
    token_ids: Callable[[list[str]], list[list[int]]], max_tokens: int
) -> Callable[[list[str]], list[list[int]]]:
    """``token_ids`` (which cuts every text at ``max_tokens``) reading a long text only as far as the cut.

    A text is tokenised from its head, cut at a space, doubled while its tokens do not reach the cut: words
    are tokenised one by one, so a head that fills the window gives the whole text's tokens. A 10 MB paste
    was tokenised whole, and three times (itself and as the context of the next two messages), to keep 512.
    """

    def ids(texts: list[str]) -> list[list[int]]:
        chars = max_tokens * HEAD_CHARS_PER_TOKEN
        heads = [head(text, chars) for text in texts]
        out = token_ids(heads)
        for i, text in enumerate(texts):
            size = chars
            while len(out[i]) < max_tokens and len(heads[i]) < len(text):
                size *= 2
                heads[i] = head(text, size)
                out[i] = token_ids([heads[i]])[0]
        return out

    return ids


def head(text: str, chars: int) -> str:
    """``text`` up to the first space at or after ``chars`` (all of it when there is none)."""
    cut = text.find(" ", chars)
    return text if cut < 0 else text[:cut]


def import_onnxruntime():  # -> the onnxruntime module
    """ONNX Runtime, imported with its telemetry off. Its POSIX builds (since 1.2x) write a device id under
    ~/.cache/Microsoft at import and would upload events: a daemon holding private memory does neither. The
    variables are read once, when it first loads, so every import of it goes through here."""
    for variable in ("ORT_DISABLE_TELEMETRY", "ORT_TELEMETRY_DISABLED"):
        os.environ.setdefault(variable, "1")
    import onnxruntime  # after the telemetry variables are set (above); loaded with the first model

    return onnxruntime


def open_session(files: ModelFiles, threads: int | None, *, custom_ops: bool = False):  # -> ort.InferenceSession
    """Verify ``files`` and open the ONNX graph with the session options every local model uses."""
    ort = import_onnxruntime()
    files.verify()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or cores()
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning worker threads burn the second core while the first waits; on a small shared VPS (and
    # next to SQLite readers) turning it off measured 1.5-2x faster batches.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # ONNX Runtime's CPU arena keeps the peak of every batch shape it has seen: one batch of 64 long
    # texts left a daemon at 1.5 GB RSS for good. Without it the memory goes back after each batch, at equal speed.
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    if custom_ops:  # string graphs tokenise with onnxruntime-extensions' SentencePiece op
        from onnxruntime_extensions import get_library_path  # deferred: only string graphs need onnxruntime-extensions

        options.register_custom_ops_library(get_library_path())
    try:
        return ort.InferenceSession(str(files.onnx), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # a truncated or foreign file in a configured model directory
        raise ModelFilesError(f"{files.onnx} is not a loadable ONNX model ({reason(exc, 200)})") from None


def mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
