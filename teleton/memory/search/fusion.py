"""Score normalisation and the weighted merge of the two retrieval legs (pure functions).

Both legs are mapped to [0, 1] before the blend (keyword: BM25 over the query's best; vector: the cosine
stretched from the band embeddings live in), so a weight means what it says; a row one leg missed gets 0 from
it (docs/memory.md, "Score fusion"). ``lift_exact``: for a keyword-shaped query, the few rows holding every one
of its words in their own text rank above all others (docs/memory.md, "An exact keyword match of a rare word").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

# Cosine values of MiniLM-like models: unrelated text sits around 0.0-0.15, paraphrases above 0.7. e5 (the
# default), centred, lives in a similar range; on LoCoMo dev any floor 0-0.3 and ceiling 0.6-0.9 moved its
# hybrid R@5 by at most 0.006.
COSINE_FLOOR = 0.1
COSINE_CEILING = 0.8
# ``lift_exact``: the rows a keyword-shaped query's words are rare in are at most this many (half the default
# page, so the meaning-match keeps the rest of it); the lifted ones clear the best other row by the margin.
EXACT_MAX_ROWS = 5
EXACT_MARGIN = 0.01


@dataclass(frozen=True)
class Fused:
    id: int
    score: float
    vector_score: float
    keyword_score: float


def normalise_keyword(bm25: Mapping[int, float]) -> dict[int, float]:
    """Map positive BM25 scores (higher = better) to (0, 1], the best one to 1."""
    if not bm25:
        return {}
    best = max(bm25.values())
    if best <= 0:
        return dict.fromkeys(bm25, 0.0)
    return {key: max(0.0, value) / best for key, value in bm25.items()}


def normalise_cosine(
    cosine: Mapping[int, float], floor: float = COSINE_FLOOR, ceiling: float = COSINE_CEILING
) -> dict[int, float]:
    span = ceiling - floor
    return {key: min(1.0, max(0.0, (value - floor) / span)) for key, value in cosine.items()}


def fuse(
    vector: Mapping[int, float],
    keyword: Mapping[int, float],
    vector_weight: float,
    keyword_weight: float,
    *,
    min_score: float,
    limit: int,
    unembedded: Collection[int] = (),
    exact: Collection[int] = (),
) -> list[Fused]:
    """Blend normalised scores, drop those under ``min_score``, return the best ``limit`` (ties by id).

    ``unembedded`` rows have no vector yet (a backlog after a model change, a quarantined text): they are
    scored by their keyword match alone, as a keyword-only search would, not as if they were unrelated.
    ``exact`` rows hold every word of a keyword-shaped query (``lift_exact``).
    """
    merged = [
        Fused(
            id=key,
            score=keyword.get(key, 0.0)
            if key in unembedded
            else vector_weight * vector.get(key, 0.0) + keyword_weight * keyword.get(key, 0.0),
            vector_score=vector.get(key, 0.0),
            keyword_score=keyword.get(key, 0.0),
        )
        for key in set(vector) | set(keyword)
    ]
    kept = [item for item in lift_exact(merged, exact, min_score) if item.score >= min_score]
    kept.sort(key=lambda item: (-item.score, item.id))
    return kept[:limit]


def lift_exact(merged: list[Fused], exact: Collection[int], floor: float = 0.0) -> list[Fused]:
    """``merged`` with the ``exact`` rows all raised by one amount, so that they rank above every other row and
    ``floor`` (the minimum score: they hold every word typed) by ``EXACT_MARGIN`` and keep their own order.
    More than ``EXACT_MAX_ROWS`` of them: the words are not rare here, and the blend alone decides."""
    lifted = [item for item in merged if item.id in exact]
    if not lifted or len(lifted) > EXACT_MAX_ROWS:
        return merged
    others = max((item.score for item in merged if item.id not in exact), default=0.0)
    lift = max(0.0, max(others, floor) + EXACT_MARGIN - min(item.score for item in lifted))
    return [replace(item, score=item.score + lift) if item.id in exact else item for item in merged]
