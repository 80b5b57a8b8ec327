"""The first two tiers of fact recall: which categories a query is about, and a search inside them.

A query about a pet should be answered from the pet facts even when thirty work facts share more of its
words: categories are picked by their label's and their best fact's cosines with the query, then searched
with the category restriction inside both legs (docs/memory.md, "Fact recall"). Everything here runs on a
reader connection (call it inside ``db.read``); table names are constants, user text only a bound parameter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from teleton.memory.search.corpora import CURRENT, FACTS
from teleton.memory.search.fts_query import keyword_terms, query_terms
from teleton.memory.search.fusion import Fused, fuse, normalise_cosine, normalise_keyword
from teleton.memory.search.hybrid import SearchParams, corpus_bm25
from teleton.memory.search.local_bm25 import Scope
from teleton.memory.search.vector_leg import exact_cosines, vector_available, vector_leg
from teleton.storage.sqlite_driver import Connection

# Raw MiniLM cosines: a query and the label of its topic sit around 0.4-0.6 ("what is my dog's name?" vs
# "pet" 0.52), unrelated labels under 0.25. A single-word query is close to many labels ("meeting": plan
# 0.43, work 0.39, family 0.35), so only categories within a small margin of the best are kept. e5's labels
# score lower ("pet" 0.33 for that question, the rest under 0.18), so with e5 a category is mostly picked by its
# facts' similarity, which runs higher (facts are embedded as questions are: ``FactStore._embed``).
CATEGORY_FLOOR = 0.35
CATEGORY_MARGIN = 0.08
MAX_CATEGORIES = 3
PROBE_K = 50  # nearest facts looked at to see which categories the query's content falls in


def category_key(name: str) -> str:
    """How categories compare: the distiller writes "pet food", memory_save "pet_food"; both are one."""
    return "_".join(name.replace("_", " ").lower().split())


def label_text(category: str) -> str:
    return category.replace("_", " ").strip()


def categories_in(conn: Connection, scopes: Sequence[str] | None) -> list[str]:
    """The distinct categories of the facts in ``scopes`` (None = every scope); the (scope, category) index
    makes this a short index walk."""
    if scopes is None:
        rows = conn.execute(f"select distinct category from facts where {CURRENT} order by category").fetchall()
    else:
        rows = conn.execute(
            f"select distinct category from facts where scope in (select value from json_each(?)) and {CURRENT} "
            "order by category",
            (json.dumps(list(scopes)),),
        ).fetchall()
    return [str(row[0]) for row in rows]


def content_scores(
    conn: Connection, vector: np.ndarray, scopes: Sequence[str] | None, k: int = PROBE_K
) -> dict[str, float]:
    """Category -> the best cosine of the query with one of its facts, among the query's ``k`` nearest."""
    cosines = vector_leg(conn, FACTS, vector, k, scopes)
    if not cosines:
        return {}
    rows = conn.execute(
        "select id, category from facts where id in (select value from json_each(?))", (json.dumps(list(cosines)),)
    ).fetchall()
    best: dict[str, float] = {}
    for row in rows:
        score = cosines[int(row[0])]
        best[row[1]] = max(score, best.get(row[1], -1.0))
    return best


def label_overlap(query: str, categories: Sequence[str]) -> dict[str, float]:
    """Keyword-only stand-in for label similarity: 1.0 when a word of the label is a word of the query
    (a prefix either way, so "pet" and "pets" meet), else nothing."""
    terms = [t for t in query_terms(query) if len(t) >= 3]
    scores: dict[str, float] = {}
    for category in categories:
        words = [w for w in label_text(category).lower().split() if len(w) >= 3]
        if any(w.startswith(t) or t.startswith(w) for w in words for t in terms):
            scores[category] = 1.0
    return scores


def pick_categories(
    label: Mapping[str, float],
    content: Mapping[str, float],
    *,
    floor: float = CATEGORY_FLOOR,
    margin: float = CATEGORY_MARGIN,
    most: int = MAX_CATEGORIES,
) -> list[str]:
    """The categories a query is about, best first. Pure: the rule in one place.

    A category scores the larger of its label and content similarity; it is picked when it reaches
    ``floor`` and lies within ``margin`` of the best category. Nothing reaching the floor picks nothing
    (recall then searches all facts).
    """
    scores = {c: max(label.get(c, -1.0), content.get(c, -1.0)) for c in {*label, *content}}
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    if not ranked or ranked[0][1] < floor:
        return []
    best = ranked[0][1]
    return [c for c, score in ranked if score >= floor and score >= best - margin][:most]


def search_in_categories(
    conn: Connection,
    query: str,
    vector: np.ndarray | None,
    scopes: Sequence[str] | None,
    categories: Sequence[str],
    params: SearchParams,
) -> list[Fused]:
    """Hybrid search over the facts of ``categories`` within ``scopes`` only (both legs filtered inside)."""
    members = _members(conn, scopes, categories)
    if not members:
        return []
    keyword = _keyword_leg(conn, query, scopes, categories, params.keyword_candidates)
    cosines: dict[int, float] = {}
    has_vectors = vector is not None and vector_available(conn, FACTS)
    if has_vectors:
        assert vector is not None
        cosines = _vector_leg(conn, vector, members, params.vector_candidates)
        cosines.update(exact_cosines(conn, FACTS, vector, [i for i in keyword if i not in cosines]))
    weights = (params.vector_weight, params.keyword_weight) if has_vectors else (0.0, 1.0)
    unembedded = {i for i in keyword if i not in cosines} if has_vectors else set()
    return fuse(
        normalise_cosine(cosines),
        normalise_keyword(keyword),
        *weights,
        min_score=params.min_score,
        limit=params.limit,
        unembedded=unembedded,
    )


def _members(conn: Connection, scopes: Sequence[str] | None, categories: Sequence[str]) -> dict[int, str]:
    """Fact id -> scope of every fact in ``categories`` within ``scopes``."""
    sql = f"select id, scope from facts where category in (select value from json_each(?)) and {CURRENT}"
    args: list[Any] = [json.dumps(list(categories))]
    if scopes is not None:
        sql += " and scope in (select value from json_each(?))"
        args.append(json.dumps(list(scopes)))
    return {int(row[0]): str(row[1]) for row in conn.execute(sql, args)}


def _keyword_leg(
    conn: Connection, query: str, scopes: Sequence[str] | None, categories: Sequence[str], limit: int
) -> dict[int, float]:
    """BM25 of the facts of ``categories``, with the statistics of the facts in ``scopes`` (see local_bm25)."""
    terms = keyword_terms(query)
    if not terms:
        return {}
    in_json = "in (select value from json_each(?))"
    scope = Scope(
        where=f"t.{CURRENT}" if scopes is None else f"t.scope {in_json} and t.{CURRENT}",
        args=() if scopes is None else (json.dumps(list(scopes)),),
        only=f"t.category {in_json}",
        only_args=(json.dumps(list(categories)),),
    )
    return corpus_bm25(conn, FACTS, terms, limit, scope)


def _vector_leg(conn: Connection, vector: np.ndarray, members: Mapping[int, str], k: int) -> dict[int, float]:
    """Id -> cosine of the ``k`` nearest members: one KNN per scope partition, restricted to the members'
    ids inside the KNN (sqlite-vec filters before it takes the top k)."""
    blob = np.asarray(vector, dtype=np.float32).tobytes()
    by_scope: dict[str, list[int]] = {}
    for fact_id, scope in members.items():
        by_scope.setdefault(scope, []).append(fact_id)
    pairs: list[tuple[int, float]] = []
    for scope, ids in by_scope.items():
        pairs += conn.execute(
            "select id, distance from facts_vec where embedding match ? and k = ? and scope = ? "
            "and id in (select value from json_each(?))",
            (blob, k, scope, json.dumps(ids)),
        ).fetchall()
    best = sorted(pairs, key=lambda pair: pair[1])[:k]
    # vec0 float columns use L2 distance; for unit vectors |a-b|^2 = 2 - 2cos.
    return {int(fact_id): 1.0 - float(distance) ** 2 / 2.0 for fact_id, distance in best}
