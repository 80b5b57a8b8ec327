"""The vector leg of the hybrid search: the nearest rows of a corpus by cosine, within a scope.

The feed's vectors are a float16 table searched through the in-memory ``bit_index``, within a scope or not.
The other corpora keep vec0 tables: a scoped search runs one exact KNN per partition (a label, a fact scope)
and keeps the best k overall; an unscoped one is one exact KNN over the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from teleton.memory.search.bit_index import half_cosines, nearest
from teleton.memory.search.corpora import Corpus
from teleton.storage.sqlite_driver import Connection


def vector_available(conn: Connection, corpus: Corpus) -> bool:
    if corpus.vec is None:
        return False
    found = conn.execute("select 1 from sqlite_master where name = ?", (corpus.vec,)).fetchone()
    if found is None:
        return False
    if corpus.half:  # a plain table: no sqlite-vec needed
        return True
    try:
        conn.execute("select vec_version()").fetchone()
    except Exception:
        return False
    return True


def vector_leg(
    conn: Connection, corpus: Corpus, query_vector: np.ndarray, k: int, scope: Sequence[Any] | None
) -> dict[int, float]:
    """Row id -> cosine similarity of the ``k`` nearest rows within scope (empty if vectors are off)."""
    if not vector_available(conn, corpus):
        return {}
    if corpus.half:
        values = None if scope is None else [int(value) for value in scope]
        return nearest(conn, corpus, np.asarray(query_vector, dtype=np.float32), k, values)
    blob = np.asarray(query_vector, dtype=np.float32).tobytes()
    if scope is None:
        pairs = conn.execute(
            f"select id, distance from {corpus.vec} where embedding match ? and k = ?", (blob, k)
        ).fetchall()
    else:
        # One KNN per partition, then the best k overall: each partition search is exact and cheap.
        pairs = []
        for value in scope:
            pairs += conn.execute(
                f"select id, distance from {corpus.vec} "
                f"where embedding match ? and k = ? and {corpus.scope_column} = ?",
                (blob, k, value),
            ).fetchall()
    best = sorted(pairs, key=lambda pair: pair[1])[:k]
    return {int(row_id): _l2_to_cosine(distance) for row_id, distance in best}


def exact_cosines(conn: Connection, corpus: Corpus, query_vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
    """Cosine of the query with the stored vectors of ``ids`` (rows without a vector are left out).

    Keyword candidates outside the vector top-k would otherwise count as cosine 0 — as if unrelated — when
    their true similarity is one point lookup away. Scoring every candidate on both signals is what lets
    the blend rank a keyword match that is also semantically close above one that merely shares a word.
    """
    assert corpus.vec is not None
    if not ids:
        return {}
    query = np.asarray(query_vector, dtype=np.float32)
    if corpus.half:  # one read for all (vec0 costs ~80 us per row)
        return half_cosines(conn, corpus.vec, query, list(ids))
    scores: dict[int, float] = {}
    for row_id in ids:  # vec0 answers `id = ?` by its rowid lookup; `id in (...)` would scan
        found = conn.execute(f"select embedding from {corpus.vec} where id = ?", (row_id,)).fetchone()
        if found is not None:
            scores[row_id] = float(np.frombuffer(found[0], dtype=np.float32) @ query)
    return scores


def _l2_to_cosine(distance: float) -> float:
    # vec0 float columns use L2 distance; for unit vectors |a-b|^2 = 2 - 2cos.
    return 1.0 - float(distance) ** 2 / 2.0
