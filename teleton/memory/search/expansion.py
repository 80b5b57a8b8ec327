"""Facts as extra keys for the messages they came from (issue 37, key expansion).

A question often asks in other words than the message that answers it ("What did Anna paint?" against
"finally finished it, it hangs in the hall now"), while the fact distilled from that message ("Anna painted a
watercolour of the harbour") says it plainly. A message is found both by its own words and by the facts drawn
from it (``fact_sources``): its score is its own (0 when the feed search did not find it) plus ``WEIGHT``
times the best score of such a fact. Measured on LoCoMo dev with its observations as the facts: R@5 0.714 ->
0.748, NDCG@5 0.565 -> 0.639 at 0.25 (0.15 and 0.4 less; rank fusion worse): docs/benchmarks.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
WEIGHT = 0.25


def fuse(
    messages: Iterable[tuple[K, float]], facts: Iterable[tuple[float, Sequence[K]]], weight: float = WEIGHT
) -> list[tuple[K, float]]:
    """Messages ranked by their own score plus ``weight`` x their best fact's; best first, ties by first seen."""
    scores: dict[K, float] = {}
    for key, score in messages:
        scores[key] = max(scores.get(key, 0.0), score)
    lifted: dict[K, float] = {}
    for score, sources in facts:
        for key in sources:
            lifted[key] = max(lifted.get(key, 0.0), score)
    for key, best in lifted.items():
        scores[key] = scores.get(key, 0.0) + weight * best
    order = {key: n for n, key in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
