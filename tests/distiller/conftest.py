from __future__ import annotations

import pytest

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.packaged import packaged_model


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(packaged_model())
