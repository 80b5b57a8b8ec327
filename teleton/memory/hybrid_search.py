"""The one hybrid (vector + keyword) search of Teleton, used by knowledge, the feed, facts and tool RAG.

Every query runs two legs over one corpus and merges them (DESIGN §5):
1. vector: the ``vector_candidates`` nearest rows by cosine, from the corpus's sqlite-vec table;
2. keyword: FTS5 BM25 over an OR of the query's words (see ``fts_query``);
then both are normalised to [0, 1] and blended (``fusion``), rows under ``min_score`` are dropped and the
best ``limit`` returned. With no query vector, or no sqlite-vec, the keyword leg alone decides.

Scope filters (a chat, knowledge labels, fact scopes) are applied INSIDE both legs: the vec0 partition key
in the KNN query and a join in the FTS query. Filtering after a global top-k would leave a small group with
no vector hits at all once the archive spans many chats. Table and column names come from the ``Corpus``
constants below, never from callers; user text only ever travels as a bound parameter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from teleton.memory.fts_query import or_expression, query_terms
from teleton.memory.fusion import fuse, normalise_cosine, normalise_keyword
from teleton.memory.local_bm25 import Scope, drop_common_terms, local_bm25
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

# Unscoped KNN over a big table goes through a 1-bit index first; this many candidates per wanted result
# are re-ranked with the exact float vectors. At 100k messages that keeps 0.64 of the exact top 30
# (`scripts/bench_search.py --oversample`); a larger factor costs more than it may (issue 14, point 2).
COARSE_OVERSAMPLE = 3
# BM25 costs a few microseconds per matching row. When a query's words match more rows than this, its most
# common words (the lowest IDF, the least information) are dropped until the rest match at most this many;
# the rarest word always stays. Small stores never get here.
MAX_KEYWORD_MATCHES = 5_000


@dataclass(frozen=True)
class Corpus:
    """Where one kind of record lives. All names are constants of this module, never user input."""

    name: str
    table: str
    fts: str
    vec: str | None
    text_column: str
    columns: tuple[str, ...]  # extra columns returned in SearchHit.meta
    scope_column: str | None  # a column of ``table`` that is also the partition key of ``vec``
    fts_columns: tuple[str, ...]  # the FTS table's columns, in order
    fts_weights: tuple[float, ...]  # bm25() weight per FTS column, in the same order
    where: str = "1"  # a constant condition on the base table (alias t)
    coarse_vec: str | None = None  # 1-bit twin of ``vec`` for unscoped KNN over a large table
    scope_fts_column: str | None = None  # an FTS column holding a token per scope value (see chat_token)
    scope_type: type = str  # scope values are converted to this (chat ids arrive as str from some callers)


def chat_token(chat_id: Any) -> str:
    """The token of a chat in ``tg_messages_fts.chat`` (mirrors FEED_CHAT_TOKEN_SQL of the schema)."""
    return "c" + str(int(chat_id)).replace("-", "m")


KNOWLEDGE = Corpus(
    name="knowledge",
    table="knowledge",
    fts="knowledge_fts",
    vec="knowledge_vec",
    text_column="text",
    columns=("source", "path", "heading", "start_line", "label"),
    scope_column="label",
    fts_columns=("heading", "text"),
    fts_weights=(0.5, 1.0),
)
FEED = Corpus(
    name="feed",
    table="tg_messages",
    fts="tg_messages_fts",
    vec="tg_messages_vec",
    text_column="text",
    columns=("chat_id", "message_id", "sender_id", "sender_name", "date", "is_outgoing"),
    scope_column="chat_id",
    fts_columns=("sender_name", "text", "context", "chat"),
    fts_weights=(1.0, 1.0, 0.3, 0.0),
    where="t.deleted = 0",
    coarse_vec="tg_messages_vec_bits",
    scope_fts_column="chat",
    scope_type=int,
)
FACTS = Corpus(
    name="facts",
    table="facts",
    fts="facts_fts",
    vec="facts_vec",
    text_column="value",
    columns=("category", "key", "scope", "source", "importance", "access_count", "last_access", "created_at"),
    scope_column="scope",
    fts_columns=("category", "key", "value"),
    fts_weights=(0.3, 0.7, 1.0),
)
TOOLS = Corpus(
    name="tools",
    table="tool_index",
    fts="tool_index_fts",
    vec="tool_index_vec",
    text_column="description",
    columns=("name",),
    scope_column=None,
    fts_columns=("name", "search_text"),
    fts_weights=(2.0, 1.0),
)


@dataclass(frozen=True)
class SearchParams:
    """The numbers of DESIGN §12; callers fill them from the config."""

    vector_weight: float = 0.5
    keyword_weight: float = 0.5
    vector_candidates: int = 30
    keyword_candidates: int = 30
    limit: int = 10
    min_score: float = 0.15


DEFAULT_PARAMS = SearchParams()
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
) -> list[SearchHit]:
    """Search ``corpus`` for ``query``; ``scope`` limits to rows whose scope column is in it (None = all).

    An empty ``scope`` returns nothing (a caller that may see no chat sees no message). Runs on the caller's
    thread: call it inside ``db.read`` (or use ``hybrid_search_db``, which runs the two legs in parallel).
    """
    scope = normalise_scope(corpus, scope)
    if scope == []:
        return []
    keyword = keyword_leg(conn, corpus, query, params.keyword_candidates, scope)
    vector = None
    if query_vector is not None and vector_available(conn, corpus):
        vector = vector_leg(conn, corpus, query_vector, params.vector_candidates, scope)
    return merge_legs(conn, corpus, query_vector, keyword, vector, params, scope)


async def hybrid_search_db(
    db: Database,
    corpus: Corpus,
    query: str,
    query_vector: np.ndarray | None = None,
    *,
    params: SearchParams = DEFAULT_PARAMS,
    scope: Sequence[Any] | None = None,
) -> list[SearchHit]:
    """``hybrid_search`` with the keyword and vector legs on two reader threads at once (same results)."""
    scope = normalise_scope(corpus, scope)
    if scope == []:
        return []
    keyword_task = db.read(lambda conn: keyword_leg(conn, corpus, query, params.keyword_candidates, scope))

    def _vector(conn: Connection) -> dict[int, float] | None:
        if query_vector is None or not vector_available(conn, corpus):
            return None
        return vector_leg(conn, corpus, query_vector, params.vector_candidates, scope)

    keyword, vector = await asyncio.gather(keyword_task, db.read(_vector))
    return await db.read(lambda conn: merge_legs(conn, corpus, query_vector, keyword, vector, params, scope))


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
) -> list[SearchHit]:
    """Complete the cosines of keyword candidates, fuse, and load the winning rows.

    ``vector`` None means vectors are unavailable: the keyword leg alone decides, with full weight.
    """
    has_vectors = vector is not None and query_vector is not None
    vector = dict(vector or {})
    if has_vectors:
        assert query_vector is not None
        vector.update(exact_cosines(conn, corpus, query_vector, [i for i in keyword if i not in vector]))
    vector_weight, keyword_weight = (params.vector_weight, params.keyword_weight) if has_vectors else (0.0, 1.0)
    fused = fuse(
        normalise_cosine(vector),
        normalise_keyword(keyword),
        vector_weight,
        keyword_weight,
        min_score=params.min_score,
        limit=params.limit * 2,  # some rows may still fail the corpus's constant filter (e.g. deleted)
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
    return hits[: params.limit]


def keyword_leg(
    conn: Connection, corpus: Corpus, query: str, limit: int, scope: Sequence[Any] | None
) -> dict[int, float]:
    """Row id -> BM25 (positive, higher is better) of the best ``limit`` keyword matches within scope.

    A scoped search ranks with the scope's own statistics (``local_bm25``: other chats' text never moves a
    chat's ranking); an unscoped one with FTS5's, which are then exactly the searched rows'. The corpus's
    constant filter (e.g. not deleted) is applied when rows are fetched.
    """
    terms = query_terms(query)
    if not terms or limit <= 0:
        return {}
    if scope is not None:
        return corpus_bm25(conn, corpus, terms, limit, scope_of(corpus, scope))
    terms = prune_common_terms(conn, corpus, terms)
    weights = ", ".join(str(float(w)) for w in corpus.fts_weights)
    sql = (
        f"select rowid, -bm25({corpus.fts}, {weights}) from {corpus.fts} "
        f"where {corpus.fts} match ? order by 2 desc limit ?"
    )
    return {int(row[0]): float(row[1]) for row in conn.execute(sql, (or_expression(terms), limit))}


def scope_of(corpus: Corpus, scope: Sequence[Any]) -> Scope:
    """The rows of ``scope``: the FTS scope tokens when the corpus has them (the feed), else its column."""
    if corpus.scope_fts_column is not None:
        tokens = " OR ".join(f'"{chat_token(value)}"' for value in scope)
        return Scope(fts_filter=f"{corpus.scope_fts_column} : ({tokens})")
    return Scope(where=f"t.{corpus.scope_column} in (select value from json_each(?))", args=(json.dumps(list(scope)),))


def corpus_bm25(conn: Connection, corpus: Corpus, terms: list[str], limit: int, scope: Scope) -> dict[int, float]:
    return local_bm25(
        conn, fts=corpus.fts, table=corpus.table, columns=corpus.fts_columns, weights=corpus.fts_weights,
        terms=terms, scope=scope, limit=limit, max_matches=MAX_KEYWORD_MATCHES,
    )  # fmt: skip


def prune_common_terms(conn: Connection, corpus: Corpus, terms: list[str]) -> list[str]:
    """Drop the most common query words while the words together match more than MAX_KEYWORD_MATCHES rows."""
    if len(terms) < 2 or _match_count(conn, corpus, or_expression(terms)) <= MAX_KEYWORD_MATCHES:
        return terms
    frequency = {term: _match_count(conn, corpus, or_expression([term])) for term in terms}
    return drop_common_terms(frequency, MAX_KEYWORD_MATCHES)


def _match_count(conn: Connection, corpus: Corpus, expression: str) -> int:
    row = conn.execute(f"select count(*) from {corpus.fts} where {corpus.fts} match ?", (expression,)).fetchone()
    return int(row[0])


def vector_available(conn: Connection, corpus: Corpus) -> bool:
    if corpus.vec is None:
        return False
    found = conn.execute("select 1 from sqlite_master where name = ?", (corpus.vec,)).fetchone()
    if found is None:
        return False
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
    blob = np.asarray(query_vector, dtype=np.float32).tobytes()
    if scope is None:
        if corpus.coarse_vec is not None and _is_large(conn, corpus):
            return _coarse_then_exact(conn, corpus, blob, k)
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


LARGE_TABLE_ROWS = 2_000


def _is_large(conn: Connection, corpus: Corpus) -> bool:
    # The 1-bit pass pays off only when a brute-force float scan would be slow; for small tables the exact
    # scan is both faster and exact. vec0's rowids table is a cheap way to know the size.
    row = conn.execute(f"select max(rowid) from {corpus.vec}_rowids").fetchone()
    return bool(row and row[0] and row[0] > LARGE_TABLE_ROWS)


def _coarse_then_exact(conn: Connection, corpus: Corpus, blob: bytes, k: int) -> dict[int, float]:
    rows = conn.execute(
        f"select id, vector from {corpus.coarse_vec} where embedding match vec_quantize_binary(?) and k = ?",
        (blob, k * COARSE_OVERSAMPLE),
    ).fetchall()
    if not rows:
        return {}
    matrix = np.stack([np.frombuffer(row[1], dtype=np.float16) for row in rows]).astype(np.float32)
    cosines = matrix @ np.frombuffer(blob, dtype=np.float32)
    best = np.argsort(-cosines)[:k]
    return {int(rows[i][0]): float(cosines[i]) for i in best}


def exact_cosines(conn: Connection, corpus: Corpus, query_vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
    """Cosine of the query with the stored vectors of ``ids`` (rows without a vector are left out).

    Keyword candidates outside the vector top-k would otherwise count as cosine 0 — as if unrelated — when
    their true similarity is one point lookup away. Scoring every candidate on both signals is what lets
    the blend rank a keyword match that is also semantically close above one that merely shares a word.
    """
    assert corpus.vec is not None
    query = np.asarray(query_vector, dtype=np.float32)
    # The coarse table's float16 copy is the cheap point read; the float table is the fallback.
    sources = [(corpus.coarse_vec, "vector", np.float16)] if corpus.coarse_vec else []
    sources.append((corpus.vec, "embedding", np.float32))
    scores: dict[int, float] = {}
    for row_id in ids:
        for table, column, dtype in sources:
            found = conn.execute(f"select {column} from {table} where id = ?", (row_id,)).fetchone()
            if found is not None:
                scores[row_id] = float(np.frombuffer(found[0], dtype=dtype).astype(np.float32) @ query)
                break
    return scores


def _l2_to_cosine(distance: float) -> float:
    # vec0 float columns use L2 distance; for unit vectors |a-b|^2 = 2 - 2cos.
    return 1.0 - float(distance) ** 2 / 2.0


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
