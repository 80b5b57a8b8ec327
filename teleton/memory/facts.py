"""Facts: small structured memories (category / key / value) with a scope, importance and access record.

A fact's scope is its privacy label (DESIGN §8, ``teleton.privacy``): ``owner``, ``user:<id>`` (another
person's DM), ``chat:<id>`` (a group) or ``public``, given by the turn that learned it; readers pass the
labels their clearance reads (None = every label, the owner). Saving skips an exact duplicate in the same
scope and updates in place when the same (category, key) is saved again, so "my cat is called X" then
"... is called Y" leaves one fact.

Recall has three tiers (seed 002; the first two live in ``fact_recall``): pick the categories the query is
about, search inside them, and fall back to all facts in scope when they yield too few. Each tier's hits are
re-ranked by relevance with an access-count boost and recency decay (half-life from the config), and every
recalled fact has its access count and last-access time bumped: what gets used stays on top.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog

from teleton.memory.corpora import FACTS
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.fact_recall import (
    categories_in,
    category_key,
    content_scores,
    label_overlap,
    label_text,
    pick_categories,
    search_in_categories,
)
from teleton.memory.hybrid_search import SearchParams, hybrid_search
from teleton.memory.vector_leg import vector_available
from teleton.privacy import OWNER, is_label
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)

RECALL_PARAMS = SearchParams(limit=20)  # candidates re-ranked by use and freshness before the final cut
# Ranking: relevance decides; use, freshness and importance reorder close calls. A fact used 20 times gets
# x1.30, one untouched for many half-lives x0.70, importance 0 / 1 gives x0.8 / x1.2.
ACCESS_BOOST = 0.1
RECENCY_WEIGHT = 0.3
_LABEL_CACHE = 2_000


@dataclass(frozen=True)
class Fact:
    value: str
    category: str = "general"
    key: str | None = None
    scope: str = OWNER  # the fact's privacy label
    source: str = "agent"
    importance: float = 0.5


@dataclass(frozen=True)
class StoredFact:
    id: int
    category: str
    key: str | None
    value: str
    scope: str
    source: str
    importance: float
    access_count: int
    last_access: float | None
    created_at: float
    updated_at: float
    score: float = 0.0

    def line(self) -> str:
        label = f"{self.category}/{self.key}" if self.key else self.category
        return f"[{label}] {self.value}"


@dataclass(frozen=True)
class Recall:
    facts: list[StoredFact]
    categories: tuple[str, ...]  # the categories searched first: picked for the query, or the one asked for
    fell_back: bool  # all facts in scope were searched too, because the categories yielded too few


@dataclass(frozen=True)
class _Plan:
    """What one recall searches with (built on the event loop, used on a reader thread)."""

    query: str
    vector: np.ndarray | None
    scopes: Sequence[str] | None
    known: list[str]  # categories present in scope
    labels: dict[str, np.ndarray]  # category -> label vector
    limit: int
    now: float


@dataclass(frozen=True)
class SaveOutcome:
    id: int
    action: str  # 'inserted' | 'updated' | 'duplicate'


def fact_hash(value: str) -> str:
    return hashlib.sha256(" ".join(value.lower().split()).encode()).hexdigest()


_COLUMNS = "id, category, key, value, scope, source, importance, access_count, last_access, created_at, updated_at"


def _stored(row: Any, score: float = 0.0) -> StoredFact:
    return StoredFact(
        id=int(row["id"]),
        category=row["category"],
        key=row["key"],
        value=row["value"],
        scope=row["scope"],
        source=row["source"],
        importance=float(row["importance"]),
        access_count=int(row["access_count"]),
        last_access=row["last_access"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        score=score,
    )


class FactStore:
    def __init__(
        self,
        db: Database,
        embedder: EmbeddingProvider | None = None,
        *,
        params: SearchParams = RECALL_PARAMS,
        half_life_days: float = 30.0,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.params = params
        self.half_life_days = half_life_days
        self._labels: dict[str, np.ndarray] = {}

    async def save(self, fact: Fact) -> SaveOutcome:
        value = fact.value.strip()
        if not value:
            raise ValueError("a fact needs a value")
        if not is_label(fact.scope):
            raise ValueError(f"a fact's scope must be a privacy label, not {fact.scope!r}")
        vector = await self._embed(f"{fact.category} {fact.key or ''} {value}")
        digest = fact_hash(value)
        now = time.time()

        def _save(conn: Connection) -> SaveOutcome:
            same = conn.execute("select id from facts where scope = ? and hash = ?", (fact.scope, digest)).fetchone()
            if same is not None:
                return SaveOutcome(int(same[0]), "duplicate")
            if fact.key:
                keyed = conn.execute(
                    "select id from facts where scope = ? and category = ? and key = ?",
                    (fact.scope, fact.category, fact.key),
                ).fetchone()
                if keyed is not None:
                    fact_id = int(keyed[0])
                    conn.execute(
                        "update facts set value = ?, hash = ?, source = ?, importance = max(importance, ?), "
                        "embedded = 0, updated_at = ? where id = ?",
                        (value, digest, fact.source, fact.importance, now, fact_id),
                    )
                    _store_vector(conn, fact_id, fact.scope, vector)
                    return SaveOutcome(fact_id, "updated")
            cur = conn.execute(
                "insert into facts(category, key, value, scope, source, importance, hash, created_at, "
                "updated_at) values (?,?,?,?,?,?,?,?,?)",
                (fact.category, fact.key, value, fact.scope, fact.source, fact.importance, digest, now, now),
            )
            fact_id = int(cur.lastrowid)
            _store_vector(conn, fact_id, fact.scope, vector)
            return SaveOutcome(fact_id, "inserted")

        return await self.db.write(_save)

    async def recall(
        self,
        query: str,
        scopes: Sequence[str] | None,
        *,
        limit: int = 5,
        category: str | None = None,
        query_vector: np.ndarray | None = None,
    ) -> list[StoredFact]:
        """The facts best matching ``query`` within ``scopes`` (None = every scope); bumps their access."""
        found = await self.retrieve(query, scopes, limit=limit, category=category, query_vector=query_vector)
        return found.facts

    async def retrieve(
        self,
        query: str,
        scopes: Sequence[str] | None,
        *,
        limit: int = 5,
        category: str | None = None,
        query_vector: np.ndarray | None = None,
    ) -> Recall:
        """Three-tier recall (see ``fact_recall``): the query's categories, their facts, then all facts.

        ``category`` restricts the search to that category (inside the search) with no fallback. Every
        returned fact has its access count and last-access time bumped.
        """
        if scopes is not None and not scopes:
            return Recall([], (), False)
        if query_vector is None and query.strip():
            query_vector = await self._embed(query)
        known = await self.db.read(lambda conn: categories_in(conn, scopes))
        labels = {} if category is not None or query_vector is None else await self._label_vectors(known)
        now = time.time()
        plan = _Plan(query, query_vector, scopes, known, labels, limit, now)

        def _read(conn: Connection) -> Recall:
            if category is not None:
                return self._explicit(conn, plan, category)
            return self._tiered(conn, plan)

        found = await self.db.read(_read)
        if found.facts:
            await self._touch([f.id for f in found.facts], now)
        log.debug("memory.recall", categories=list(found.categories), fell_back=found.fell_back, count=len(found.facts))
        return found

    def _explicit(self, conn: Connection, plan: _Plan, category: str) -> Recall:
        wanted = [c for c in plan.known if category_key(c) == category_key(category)]
        hits = search_in_categories(conn, plan.query, plan.vector, plan.scopes, wanted, self.params) if wanted else []
        ranked = self._ranked(conn, [(h.id, h.score) for h in hits], plan.now)
        return Recall(ranked[: plan.limit], tuple(wanted), False)

    def _tiered(self, conn: Connection, plan: _Plan) -> Recall:
        picked = self._pick(conn, plan)
        focused: list[StoredFact] = []
        if picked:
            hits = search_in_categories(conn, plan.query, plan.vector, plan.scopes, picked, self.params)
            focused = self._ranked(conn, [(h.id, h.score) for h in hits], plan.now)[: plan.limit]
        if len(focused) >= plan.limit:
            return Recall(focused, tuple(picked), False)
        # Too few in the picked categories (or none picked): the best of all facts in scope fill the rest,
        # after the focused ones, which the query is most clearly about.
        flat = hybrid_search(conn, FACTS, plan.query, plan.vector, params=self.params, scope=plan.scopes)
        seen = {f.id for f in focused}
        rest = [f for f in self._ranked(conn, [(h.id, h.score) for h in flat], plan.now) if f.id not in seen]
        return Recall(focused + rest[: plan.limit - len(focused)], tuple(picked), True)

    def _pick(self, conn: Connection, plan: _Plan) -> list[str]:
        if plan.vector is None:
            return pick_categories(label_overlap(plan.query, plan.known), {})
        vector = np.asarray(plan.vector, dtype=np.float32)
        label = {c: float(v @ vector) for c, v in plan.labels.items() if v.shape == vector.shape}
        if not label:  # a query vector from the caller but no embedder of our own: labels by their words
            label = label_overlap(plan.query, plan.known)
        return pick_categories(label, content_scores(conn, vector, plan.scopes))

    def _ranked(self, conn: Connection, hits: Sequence[tuple[int, float]], now: float) -> list[StoredFact]:
        if not hits:
            return []
        rows = {
            int(r["id"]): r
            for r in conn.execute(
                f"select {_COLUMNS} from facts where id in (select value from json_each(?))",
                (_json([fact_id for fact_id, _ in hits]),),
            )
        }
        ranked = [_stored(rows[i], self._rank(score, rows[i], now)) for i, score in hits if i in rows]
        ranked.sort(key=lambda f: (-f.score, f.id))
        return ranked

    async def _label_vectors(self, categories: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors of the category labels, embedded once per process (categories are few and stable)."""
        if self.embedder is None or not self.db.vectors:
            return {}
        missing = [c for c in categories if c not in self._labels]
        if missing:
            try:
                vectors = await self.embedder.embed([label_text(c) for c in missing])
            except Exception as exc:  # a failing provider costs the label signal, not the recall
                log.warning("category_label_embedding_failed", error=str(exc))
                vectors = None
            if vectors is not None:
                if len(self._labels) > _LABEL_CACHE:
                    self._labels.clear()
                self._labels.update(zip(missing, vectors, strict=True))
        return {c: self._labels[c] for c in categories if c in self._labels}

    async def salient(self, scopes: Sequence[str] | None, threshold: float = 0.85, limit: int = 10) -> list[StoredFact]:
        """High-importance facts of ``scopes``, which surface in a DM's prompt without being asked for (the
        caller passes the DM's own label only: a group's "important fact" is never an owner instruction)."""
        scope_sql, args = _scope_filter(scopes)

        def _read(conn: Connection) -> list[StoredFact]:
            rows = conn.execute(
                f"select {_COLUMNS} from facts where importance >= ? {scope_sql} "
                "order by importance desc, access_count desc, updated_at desc limit ?",
                (threshold, *args, limit),
            ).fetchall()
            return [_stored(r) for r in rows]

        return await self.db.read(_read)

    async def recent(self, scopes: Sequence[str] | None, limit: int = 10) -> list[StoredFact]:
        scope_sql, args = _scope_filter(scopes)
        rows = await self.db.fetchall(
            f"select {_COLUMNS} from facts where 1 {scope_sql} order by updated_at desc limit ?",
            (*args, limit),
        )
        return [_stored(r) for r in rows]

    async def remove(self, fact_id: int, scopes: Sequence[str] | None) -> bool:
        scope_sql, args = _scope_filter(scopes)

        def _remove(conn: Connection) -> bool:
            cur = conn.execute(f"delete from facts where id = ? {scope_sql}", (fact_id, *args))
            if cur.rowcount and vector_available(conn, FACTS):
                conn.execute("delete from facts_vec where id = ?", (fact_id,))
            return bool(cur.rowcount)

        return await self.db.write(_remove)

    async def count(self, scopes: Sequence[str] | None = None) -> int:
        scope_sql, args = _scope_filter(scopes)
        row = await self.db.fetchone(f"select count(*) from facts where 1 {scope_sql}", tuple(args))
        return int(row[0])

    def _rank(self, relevance: float, row: Any, now: float) -> float:
        # Relevance decides; use and freshness only reorder close calls. Freshness is the last use, or the
        # last update of a fact never recalled.
        boost = 1.0 + ACCESS_BOOST * math.log1p(int(row["access_count"]))
        last = row["last_access"] or row["updated_at"]
        age_days = max(0.0, (now - float(last)) / 86400)
        decay = 0.5 ** (age_days / self.half_life_days)
        freshness = 1.0 - RECENCY_WEIGHT + RECENCY_WEIGHT * decay
        return relevance * boost * freshness * (0.8 + 0.4 * float(row["importance"]))

    async def _touch(self, ids: Sequence[int], now: float) -> None:
        await self.db.write(
            lambda conn: conn.execute(
                "update facts set access_count = access_count + 1, last_access = ? "
                "where id in (select value from json_each(?))",
                (now, _json(ids)),
            )
        )

    async def _embed(self, text: str) -> np.ndarray | None:
        if not self.db.vectors:
            return None
        return await embed_query(self.embedder, text)  # no vector is fine: FTS still finds the fact


def _store_vector(conn: Connection, fact_id: int, scope: str, vector: np.ndarray | None) -> None:
    if vector is None or not vector_available(conn, FACTS):
        return
    conn.execute("delete from facts_vec where id = ?", (fact_id,))
    conn.execute(
        "insert into facts_vec(id, scope, embedding) values (?, ?, ?)",
        (fact_id, scope, np.asarray(vector, dtype=np.float32).tobytes()),
    )
    conn.execute("update facts set embedded = 1 where id = ?", (fact_id,))


def _scope_filter(scopes: Sequence[str] | None) -> tuple[str, list[Any]]:
    if scopes is None:
        return "", []
    return "and scope in (select value from json_each(?))", [_json(list(scopes))]


def _json(values: Sequence[Any]) -> str:
    return json.dumps(list(values))
