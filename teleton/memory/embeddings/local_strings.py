"""A local model whose ONNX graph takes strings: the multilingual Universal Sentence Encoder.

Tokenisation (SentencePiece) and pooling happen inside the graph, so texts go in as they are, in
length-sorted batches (the graph pads a batch to its longest text), and vectors come out to be normalised.
Same worker thread and session rules as :mod:`teleton.memory.embeddings.local`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from teleton.memory.embeddings.local import OnWorkerThread, open_session, token_batches
from teleton.memory.embeddings.model_files import ModelFiles

# The graph reads whole texts and averages over them: past ~1,000 characters (about MiniLM's 256-token cut)
# more text moves the vector little but costs time linearly (20,000 characters take 30x as long).
MAX_CHARS = 1_000
CHARS_PER_TOKEN = 4  # to reuse token_batches' padded-size budget on characters


class StringsEmbedder(OnWorkerThread):
    """An :class:`EmbeddingProvider` over an ONNX graph with a string input and a vector output."""

    def _load(self, files: ModelFiles, threads: int | None) -> None:
        self._session = open_session(files, threads, custom_ops=True)
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, getattr(self, "dims", 0)), dtype=np.float32)
        clipped = [t[:MAX_CHARS] or " " for t in texts]
        lengths = [max(1, len(t) // CHARS_PER_TOKEN) for t in clipped]
        order = sorted(range(len(clipped)), key=lambda i: lengths[i])
        out: list[np.ndarray] = [np.empty(0)] * len(clipped)
        for batch in token_batches(order, lengths, self.batch_size):
            strings = np.array([clipped[i] for i in batch], dtype=object)
            vectors = self._session.run([self._output], {self._input: strings})[0]
            for i, vector in zip(batch, vectors, strict=True):
                out[i] = vector
        matrix = np.stack(out).astype(np.float32)
        return matrix / np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)
