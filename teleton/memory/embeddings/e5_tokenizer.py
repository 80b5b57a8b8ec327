"""e5's tokenizer: the normaliser its build wrote (``normalise.json``), then SentencePiece."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from teleton.providers.pinned_files import ModelFilesError

MAX_TOKENS = 512  # e5's position table
_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    """Token ids for e5: the file's normaliser, then SentencePiece; ``<s> … </s>``, at most 512 tokens."""

    def __init__(self, model: Path) -> None:
        import sentencepiece  # deferred: only the e5 model tokenises with SentencePiece

        try:
            self._sp = sentencepiece.SentencePieceProcessor(model_file=str(model))
            table = json.loads((model.parent / "normalise.json").read_text())
        except (OSError, ValueError, RuntimeError) as exc:
            raise ModelFilesError(f"{model} is not a usable tokenizer ({exc})") from None
        self._table = {int(k): v for k, v in table.items()}
        self._bos, self._eos = self._sp.bos_id(), self._sp.eos_id()

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        normalised = [_SPACES.sub(" ", t.translate(self._table)) for t in texts]
        return [[self._bos, *ids[: MAX_TOKENS - 2], self._eos] for ids in self._sp.encode(normalised)]
