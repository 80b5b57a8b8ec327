"""The one hybrid (vector + keyword) search of Teleton, used by knowledge, the feed, facts and tool RAG.

Every query runs two legs over one corpus: the ``vector_candidates`` nearest rows by cosine (``vector_leg``)
and FTS5 BM25 over an OR of the query's words (``fts_query``); both are normalised and blended (``fusion``),
rows under ``min_score`` dropped and the best ``limit`` returned; with no query vector the keyword leg alone
decides. Scope filters run inside both legs (docs/memory.md, "Score fusion").
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from teleton.config.schema import Config, MemoryConfig, default
from teleton.memory.embeddings.model_files import search_weights, stemmed_vector_weight
from teleton.memory.search.corpora import Corpus, chat_token
from teleton.memory.search.exact_words import exact_matches
from teleton.memory.search.fts_query import keyword_terms, or_expression, query_language
from teleton.memory.search.fusion import fuse, normalise_cosine, normalise_keyword
from teleton.memory.search.local_bm25 import Scope, drop_common_terms, local_bm25, term_counts
from teleton.memory.search.stemming import STEMMERS
from teleton.memory.search.time_ranges import TimeRange
from teleton.memory.search.vector_leg import exact_cosines, vector_available, vector_leg
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

# BM25 costs a few microseconds per matching row. When a query's words match more rows than this, its most
# common words (the lowest IDF, the least information) are dropped until the rest match at most this many;
# the rarest word always stays, and if it alone matches more, its newest this many matches are scored.
# Small stores never get here; at 100k messages 5,000 cost the all-chat keyword leg 41 ms median.
MAX_KEYWORD_MATCHES = 2_000
# A query naming a time (``time_ranges``) re-ranks this many candidates, adding TIME_BONUS to the score of
# those dated in it. LoCoMo dev: R@5 0.709 -> 0.717, NDCG@5 0.567 -> 0.582 (144 of 1,154 questions name a time).
TIME_CANDIDATES = 50
TIME_BONUS = 0.5
TIME_SLACK_S = 7 * 86_400


@dataclass(frozen=True)
class SearchParams:
    """The numbers of docs/configuration.md; callers fill them from the config."""

    vector_weight: float = 0.5
    keyword_weight: float = 0.5
    vector_candidates: int = default(MemoryConfig, "vector_candidates")
    keyword_candidates: int = default(MemoryConfig, "vector_candidates")
    limit: int = default(MemoryConfig, "result_limit")
    min_score: float = default(MemoryConfig, "min_score")
    # The vector share of a question whose words the keyword leg matches by stem prefixes (every language but
    # English: ``stemming``); None: ``vector_weight`` for every question (model_files.STEMMED_VECTOR_WEIGHTS).
    stemmed_vector_weight: float | None = None


DEFAULT_PARAMS = SearchParams()


def configured_params(config: Config) -> SearchParams:
    """The searches' numbers as ``config`` sets them (``memory.*``; the weights the embedding model's own unless
    set): one place for the turn, its tools, the knowledge index and ``teleton feed search``."""
    memory = config.memory
    vector_weight, keyword_weight = search_weights(config.embedding, memory)
    return SearchParams(
        vector_weight=vector_weight,
        keyword_weight=keyword_weight,
        stemmed_vector_weight=stemmed_vector_weight(config.embedding, memory),
        vector_candidates=memory.vector_candidates,
        keyword_candidates=memory.vector_candidates,
        limit=memory.result_limit,
        min_score=memory.min_score,
    )


TOOL_PARAMS = SearchParams(vector_weight=0.6, keyword_weight=0.4)


@dataclass
class SearchHit:
    id: int
    text: str
    score: float
    vector_score: float
    keyword_score: float
    corpus: str
    meta: dict[str, Any] = field(default_factory=dict)


def hybrid_search(
    conn: Connection,
    corpus: Corpus,
    query: str,
    query_vector: np.ndarray | None = None,
    *,
    params: SearchParams = DEFAULT_PARAMS,
    scope: Sequence[Any] | None = None,
    when: TimeRange | None = None,
) -> list[SearchHit]:
    """Search ``corpus`` for ``query``; ``scope`` limits to rows whose scope column is in it (None = all).

    An empty ``scope`` returns nothing (a caller that may see no chat sees no message). ``when`` (the period
    the query names, ``time_ranges``) ranks rows of that time higher in a corpus with dates. Runs on the
    caller's thread: call it inside ``db.read`` (or use ``hybrid_search_db``, which runs the two legs in
    parallel).
    """
    scope = normalise_scope(corpus, scope)
    if scope == []:
        return []
    params = weighed_for(query, params)
    keyword = keyword_leg(conn, corpus, query, params.keyword_candidates, scope)
    vector = None
    if query_vector is not None and vector_available(conn, corpus):
        vector = vector_leg(conn, corpus, query_vector, params.vector_candidates, scope)
    exact = exact_matches(conn, corpus, query, keyword)
    return merge_legs(conn, corpus, query_vector, keyword, vector, params, scope, when, exact)


async def hybrid_search_db(
    db: Database,
    corpus: Corpus,
    query: str,
    query_vector: np.ndarray | asyncio.Future[np.ndarray | None] | None = None,
    *,
    params: SearchParams = DEFAULT_PARAMS,
    scope: Sequence[Any] | None = None,
    when: TimeRange | Callable[[], TimeRange | None] | None = None,
) -> list[SearchHit]:
    """``search.hybrid`` with the keyword and vector legs on two reader threads at once (same results).

    ``query_vector`` may still be being computed (a future): the keyword leg, which needs none, starts first.
    ``when`` may be a function finding it in the query (``time_ranges``): it runs while the keyword leg does.
    """
    scope = normalise_scope(corpus, scope)
    if scope == []:
        return []
    params = weighed_for(query, params)
    period: TimeRange | None = None
    vector_now: np.ndarray | None = None

    def _merge(conn: Connection, keyword: dict[int, float], vector: dict[int, float] | None) -> list[SearchHit]:
        exact = exact_matches(conn, corpus, query, keyword)
        return merge_legs(conn, corpus, vector_now, keyword, vector, params, scope, period, exact)

    legs = _Legs(_merge)

    def _keyword(conn: Connection) -> list[SearchHit] | None:
        return legs.done(conn, keyword=keyword_leg(conn, corpus, query, params.keyword_candidates, scope))

    keyword_task = asyncio.ensure_future(db.read(_keyword))
    try:
        period = when() if callable(when) else when
        vector_now = await query_vector if isinstance(query_vector, asyncio.Future) else query_vector
    except BaseException:
        keyword_task.cancel()
        raise

    def _vector(conn: Connection) -> list[SearchHit] | None:
        found = None
        if vector_now is not None and vector_available(conn, corpus):
            found = vector_leg(conn, corpus, vector_now, params.vector_candidates, scope)
        return legs.done(conn, vector=found)

    # The leg that ends second merges on its own reader (submitted after ``period`` and ``vector_now`` are set).
    merged = await asyncio.gather(keyword_task, db.read(_vector))
    return next(hits for hits in merged if hits is not None)


class _Legs:
    """The two legs' results as they end, each on its own reader thread; the second to end merges them there,
    which saves the merge a round trip through the event loop to a third reader."""

    def __init__(
        self, merge: Callable[[Connection, dict[int, float], dict[int, float] | None], list[SearchHit]]
    ) -> None:
        self._merge = merge
        self._lock = threading.Lock()
        self._ended: dict[str, Any] = {}

    def done(self, conn: Connection, **leg: dict[int, float] | None) -> list[SearchHit] | None:
        with self._lock:
            self._ended.update(leg)
            if len(self._ended) < 2:
                return None
        return self._merge(conn, self._ended["keyword"], self._ended["vector"])


def weighed_for(query: str, params: SearchParams) -> SearchParams:
    """``params`` with ``stemmed_vector_weight`` as the vector share when the keyword leg stems ``query``."""
    weight = params.stemmed_vector_weight
    if weight is None or query_language(query) not in STEMMERS:
        return params
    return replace(params, vector_weight=weight, keyword_weight=1.0 - weight)


def normalise_scope(corpus: Corpus, scope: Sequence[Any] | None) -> list[Any] | None:
    """None (everything), or the distinct scope values in the corpus's type ([] when nothing may be seen)."""
    if scope is None:
        return None
    if corpus.scope_column is None:
        return []
    return list(dict.fromkeys(corpus.scope_type(value) for value in scope))


def merge_legs(
    conn: Connection,
    corpus: Corpus,
    query_vector: np.ndarray | None,
    keyword: dict[int, float],
    vector: dict[int, float] | None,
    params: SearchParams,
    scope: Sequence[Any] | None,
    when: TimeRange | None = None,
    exact: Collection[int] = (),
) -> list[SearchHit]:
    """Complete the cosines of keyword candidates, fuse, and load the winning rows.

    ``vector`` None means vectors are unavailable: the keyword leg alone decides, with full weight.
    ``exact``: the keyword candidates holding every word of a keyword-shaped query (``exact_matches``).
    """
    has_vectors = vector is not None and query_vector is not None
    vector = dict(vector or {})
    unembedded: set[int] = set()
    if has_vectors:
        assert query_vector is not None
        vector.update(exact_cosines(conn, corpus, query_vector, [i for i in keyword if i not in vector]))
        unembedded = {i for i in keyword if i not in vector}  # no vector yet: judged by its words alone
    vector_weight, keyword_weight = (params.vector_weight, params.keyword_weight) if has_vectors else (0.0, 1.0)
    by_time = when is not None and corpus.date_column is not None
    fused = fuse(
        normalise_cosine(vector),
        normalise_keyword(keyword),
        vector_weight,
        keyword_weight,
        min_score=params.min_score,
        unembedded=unembedded,
        exact=exact,
        # Some rows may still fail the corpus's constant filter (e.g. deleted); a time named in the query
        # may lift a row from further down.
        limit=max(params.limit * 2, TIME_CANDIDATES) if by_time else params.limit * 2,
    )
    rows = fetch_rows(conn, corpus, [item.id for item in fused], scope)
    hits = [
        SearchHit(
            id=item.id,
            text=rows[item.id][corpus.text_column],
            score=item.score,
            vector_score=item.vector_score,
            keyword_score=item.keyword_score,
            corpus=corpus.name,
            meta={col: rows[item.id][col] for col in corpus.columns},
        )
        for item in fused
        if item.id in rows
    ]
    if by_time:
        assert when is not None and corpus.date_column is not None
        hits = boost_in_time(hits, when, corpus.date_column)
    return hits[: params.limit]


def boost_in_time(hits: list[SearchHit], when: TimeRange, date_column: str) -> list[SearchHit]:
    """Rows dated in ``when`` (or up to TIME_SLACK_S after: an event is talked about after it happened) first
    among the relevant ones: TIME_BONUS on their score."""
    for hit in hits:
        if when.start <= float(hit.meta[date_column] or 0) < when.end + TIME_SLACK_S:
            hit.score += TIME_BONUS
            hit.meta["time_boost"] = TIME_BONUS  # why it ranked, for whoever explains a result
    return sorted(hits, key=lambda hit: -hit.score)


def keyword_leg(
    conn: Connection, corpus: Corpus, query: str, limit: int, scope: Sequence[Any] | None
) -> dict[int, float]:
    """Row id -> BM25 (positive, higher is better) of the best ``limit`` keyword matches within scope.

    A scoped search ranks with the scope's own statistics (``local_bm25``: other chats' text never moves a
    chat's ranking); an unscoped one with FTS5's, which are then exactly the searched rows'. The corpus's
    constant filter (e.g. not deleted) is applied when rows are fetched.
    """
    terms = keyword_terms(query)
    if not terms or limit <= 0:
        return {}
    if scope is not None:
        return corpus_bm25(conn, corpus, terms, limit, scope_of(corpus, scope))
    terms = prune_common_terms(conn, corpus, terms)
    weights = ", ".join(str(float(w)) for w in corpus.fts_weights)
    # The newest MAX_KEYWORD_MATCHES matches at most are scored: when even the rarest word is that common,
    # the ranking among its matches is weak anyway and recent messages are the likelier answers. SQLite sorts
    # them: 2,000 rows made into tuples and sorted in Python cost more than scoring them.
    sql = (
        f"select rowid, score from (select rowid, -bm25({corpus.fts}, {weights}) as score from {corpus.fts} "
        f"where {corpus.fts} match ? order by rowid desc limit ?) order by score desc, rowid desc limit ?"
    )
    best = conn.execute(sql, (or_expression(terms), MAX_KEYWORD_MATCHES, limit)).fetchall()
    return {int(row[0]): float(row[1]) for row in best}


def scope_of(corpus: Corpus, scope: Sequence[Any]) -> Scope:
    """The rows of ``scope``: the FTS scope tokens when the corpus has them (the feed), else its column."""
    if corpus.scope_fts_column is not None:
        tokens = " OR ".join(f'"{chat_token(value)}"' for value in scope)
        return Scope(fts_filter=f"{corpus.scope_fts_column} : ({tokens})")
    return Scope(where=f"t.{corpus.scope_column} in (select value from json_each(?))", args=(json.dumps(list(scope)),))


def corpus_bm25(conn: Connection, corpus: Corpus, terms: list[str], limit: int, scope: Scope) -> dict[int, float]:
    return local_bm25(
        conn, fts=corpus.fts, table=corpus.table, weights=corpus.fts_weights, terms=terms, scope=scope,
        limit=limit, max_matches=MAX_KEYWORD_MATCHES,
    )  # fmt: skip


def prune_common_terms(conn: Connection, corpus: Corpus, terms: list[str]) -> list[str]:
    """Drop the most common query words while the words together match more than MAX_KEYWORD_MATCHES rows."""
    if len(terms) < 2:
        return terms
    counts = term_counts(
        conn, fts=corpus.fts, table=corpus.table, scope=Scope(), terms=terms, cap=MAX_KEYWORD_MATCHES + 1
    )
    return drop_common_terms(counts, MAX_KEYWORD_MATCHES)


def fetch_rows(conn: Connection, corpus: Corpus, ids: Sequence[int], scope: Sequence[Any] | None) -> dict[int, Any]:
    """The base rows of ``ids`` that pass the corpus's constant filter and the scope (checked again here)."""
    if not ids:
        return {}
    columns = ", ".join(f"t.{c}" for c in (corpus.text_column, *corpus.columns))
    args: list[Any] = [json.dumps(list(ids))]
    scope_sql = ""
    if scope is not None:
        scope_sql = f"and t.{corpus.scope_column} in (select value from json_each(?))"
        args.append(json.dumps(list(scope)))
    sql = (
        f"select t.id, {columns} from {corpus.table} t "
        f"where t.id in (select value from json_each(?)) {scope_sql} and {corpus.where}"
    )
    return {int(row["id"]): row for row in conn.execute(sql, args)}
