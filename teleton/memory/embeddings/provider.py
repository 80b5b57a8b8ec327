"""The one interface every embedding backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class EmbeddingProvider(Protocol):
    """Turns texts into L2-normalised float32 vectors of ``dims`` dimensions.

    ``model_id`` names the model exactly (it keys the embedding cache and the vector index, so vectors of two
    models are never mixed). Implementations never block the event loop: work runs on a worker thread.
    """

    model_id: str
    dims: int

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dims); row i is the vector of texts[i]."""
        ...
