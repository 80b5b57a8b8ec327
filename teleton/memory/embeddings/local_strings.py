"""A local model whose ONNX graph takes strings: the multilingual Universal Sentence Encoder.

Tokenisation (SentencePiece) and pooling happen inside the graph, so texts go in as they are, one per run,
and vectors come out to be normalised. Same threads and session rules as :mod:`teleton.memory.embeddings.local`.
"""

from __future__ import annotations

import numpy as np

from teleton.memory.embeddings.local import OnWorkerThread, open_session
from teleton.memory.embeddings.model_files import ModelFiles

# The graph reads whole texts and averages over them: past ~1,000 characters (about MiniLM's 256-token cut)
# more text moves the vector little but costs time linearly (20,000 characters take 30x as long).
MAX_CHARS = 1_000


class StringsEmbedder(OnWorkerThread):
    """An :class:`EmbeddingProvider` over an ONNX graph with a string input and a vector output."""

    def _load(self, files: ModelFiles) -> None:
        self._session = open_session(files, 1, custom_ops=True)
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name

    def _run_one(self, text: str) -> np.ndarray:
        strings = np.array([text[:MAX_CHARS] or " "], dtype=object)
        vector = self._session.run([self._output], {self._input: strings})[0][0].astype(np.float32)
        return vector / max(float(np.linalg.norm(vector)), 1e-12)
