"""The project's one token estimate (compaction, the memory budget, a provider's prompt size)."""

from __future__ import annotations

import json
import math
from typing import Any

CHARS_PER_TOKEN = 3.5  # estimate used only until the API has reported real usage


def estimate_tokens(payload: Any) -> int:
    """Tokens in ``payload`` (a text, or anything JSON). Rounded up, so the count of a text is never more than
    the sum of the counts of its parts."""
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return math.ceil(len(text) / CHARS_PER_TOKEN)
