"""Facts: small structured memories (category / key / value) with a scope, a subject, importance and access.

A fact's scope is its privacy label (docs/privacy.md); readers pass the labels their clearance reads (None:
every label, the owner's). Saving skips an exact duplicate of a current fact, and a fact about the same
subject and attribute (or one the distiller names as replaced) supersedes the old one, kept as history
(docs/memory.md, "Corrections supersede"). Recall has three tiers (the first two in ``recall``), re-ranked with
an access boost and recency decay; every recalled fact counts as used.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import structlog

from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.facts.recall import (
    categories_in,
    category_key,
    content_scores,
    label_overlap,
    label_text,
    pick_categories,
    search_in_categories,
)
from teleton.memory.facts.rows import COLUMNS, Fact, StoredFact, current_duplicate, embedding_text, fact_hash, stored
from teleton.memory.facts.subjects import may_replace
from teleton.memory.search.corpora import CURRENT, FACTS
from teleton.memory.search.hybrid import SearchParams, hybrid_search
from teleton.memory.search.vector_leg import vector_available
from teleton.privacy import is_label
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)

RECALL_PARAMS = SearchParams(limit=20)  # candidates re-ranked by use and freshness before the final cut
# Ranking: relevance decides; use, freshness and importance reorder close calls. A fact used 20 times gets
# x1.09, one untouched for many half-lives x0.70, importance 0 / 1 gives x0.8 / x1.2. Every recalled fact
# counts as used, so a larger boost lets whatever came up once crowd out better matches later. LoCoMo
# observations (958 questions in a row), R@5 at x1.30 / x1.09 / no boost: e5 0.673 / 0.706 / 0.711,
# MiniLM 0.713 / 0.718 / 0.718.
ACCESS_BOOST = 0.03
RECENCY_WEIGHT = 0.3
_LABEL_CACHE = 2_000


@dataclass(frozen=True)
class Recall:
    facts: list[StoredFact]
    categories: tuple[str, ...]  # the categories searched first: picked for the query, or the one asked for
    fell_back: bool  # all facts in scope were searched too, because the categories yielded too few
    history: list[StoredFact] = field(default_factory=list)  # what the facts replaced (history=True only)


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
    keep: Callable[[str], bool]  # which subjects this recall may return


@dataclass(frozen=True)
class SaveOutcome:
    id: int
    action: str  # 'inserted' | 'superseded' | 'updated' | 'duplicate'
    replaced: int | None = None  # the fact a 'superseded' save ended


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
        vector = await self._embed(embedding_text(fact.category, fact.key, value))
        digest = fact_hash(value)
        now = time.time()

        def _save(conn: Connection) -> SaveOutcome:
            same = current_duplicate(conn, fact, digest)
            if same is not None:
                return SaveOutcome(same, "duplicate")
            old, blocked = replaced_fact(conn, fact)
            if old is not None:  # ended first: the current-key index admits one current fact per attribute
                conn.execute("update facts set valid_until = ? where id = ?", (now, old))
                if vector_available(conn, FACTS):
                    conn.execute("delete from facts_vec where id = ?", (old,))
            cur = conn.execute(
                "insert into facts(category, key, value, scope, subject, source, importance, hash, created_at, "
                "updated_at, valid_from) values (?,?,?,?,?,?,?,?,?,?,?)",
                (fact.category, None if blocked else fact.key, value, fact.scope, fact.subject, fact.source,
                 fact.importance, digest, now, now, now),
            )  # fmt: skip
            fact_id = int(cur.lastrowid)
            _store_vector(conn, fact_id, fact.scope, vector)
            if old is None:
                return SaveOutcome(fact_id, "inserted")
            conn.execute("update facts set superseded_by = ? where id = ?", (fact_id, old))
            return SaveOutcome(fact_id, "superseded", replaced=old)

        outcome = await self.db.write(_save)
        if outcome.replaced is not None:
            log.info("memory.fact_superseded", old=outcome.replaced, new=outcome.id, scope=fact.scope)
        return outcome

    async def recall(self, query: str, scopes: Sequence[str] | None, **options: Any) -> list[StoredFact]:
        """``retrieve`` (same options), the facts alone: the current ones best matching ``query`` within
        ``scopes`` (None = every scope); bumps their access."""
        return (await self.retrieve(query, scopes, **options)).facts

    async def retrieve(
        self,
        query: str,
        scopes: Sequence[str] | None,
        *,
        limit: int = 5,
        category: str | None = None,
        query_vector: np.ndarray | None = None,
        keep: Callable[[str], bool] = lambda subject: True,
        history: bool = False,
    ) -> Recall:
        """Three-tier recall (see ``recall``): the query's categories, their facts, then all facts.

        ``category`` restricts the search to that category (inside the search) with no fallback; ``keep``
        to facts about the subjects it admits. Only current facts are found; ``history`` adds, in
        ``Recall.history``, the facts they superseded. Every returned current fact has its access count and
        last-access time bumped.
        """
        if scopes is not None and not scopes:
            return Recall([], (), False)
        if query_vector is None and query.strip():
            query_vector = await self._embed(query)
        known = await self.db.read(lambda conn: categories_in(conn, scopes))
        labels = {} if category is not None or query_vector is None else await self._label_vectors(known)
        now = time.time()
        plan = _Plan(query, query_vector, scopes, known, labels, limit, now, keep)

        def _read(conn: Connection) -> Recall:
            found = self._explicit(conn, plan, category) if category is not None else self._tiered(conn, plan)
            if history and found.facts:
                return replace(found, history=predecessors(conn, [f.id for f in found.facts]))
            return found

        found = await self.db.read(_read)
        if found.facts:
            await self._touch([f.id for f in found.facts], now)
        log.debug("memory.recall", categories=list(found.categories), fell_back=found.fell_back, count=len(found.facts))
        return found

    async def related(self, text: str, scopes: Sequence[str], *, limit: int) -> list[StoredFact]:
        """The current facts of ``scopes`` nearest to ``text``, without counting it as a use (the distiller
        looks at them to say which ones a conversation changed)."""
        vector = await self._embed(text) if text.strip() else None
        params = replace(self.params, limit=limit, min_score=0.0)

        def _read(conn: Connection) -> list[StoredFact]:
            hits = hybrid_search(conn, FACTS, text, vector, params=params, scope=scopes)
            rows = {
                int(r["id"]): r
                for r in conn.execute(
                    f"select {COLUMNS} from facts where id in (select value from json_each(?))",
                    (_json([h.id for h in hits]),),
                )
            }
            return [stored(rows[h.id], h.score) for h in hits if h.id in rows]

        return await self.db.read(_read)

    def _explicit(self, conn: Connection, plan: _Plan, category: str) -> Recall:
        wanted = [c for c in plan.known if category_key(c) == category_key(category)]
        hits = search_in_categories(conn, plan.query, plan.vector, plan.scopes, wanted, self.params) if wanted else []
        ranked = self._ranked(conn, [(h.id, h.score) for h in hits], plan)
        return Recall(ranked[: plan.limit], tuple(wanted), False)

    def _tiered(self, conn: Connection, plan: _Plan) -> Recall:
        picked = self._pick(conn, plan)
        focused: list[StoredFact] = []
        if picked:
            hits = search_in_categories(conn, plan.query, plan.vector, plan.scopes, picked, self.params)
            focused = self._ranked(conn, [(h.id, h.score) for h in hits], plan)[: plan.limit]
        if len(focused) >= plan.limit:
            return Recall(focused, tuple(picked), False)
        # Too few in the picked categories (or none picked): the best of all facts in scope fill the rest,
        # after the focused ones, which the query is most clearly about.
        flat = hybrid_search(conn, FACTS, plan.query, plan.vector, params=self.params, scope=plan.scopes)
        seen = {f.id for f in focused}
        rest = [f for f in self._ranked(conn, [(h.id, h.score) for h in flat], plan) if f.id not in seen]
        return Recall(focused + rest[: plan.limit - len(focused)], tuple(picked), True)

    def _pick(self, conn: Connection, plan: _Plan) -> list[str]:
        if plan.vector is None:
            return pick_categories(label_overlap(plan.query, plan.known), {})
        vector = np.asarray(plan.vector, dtype=np.float32)
        label = {c: float(v @ vector) for c, v in plan.labels.items() if v.shape == vector.shape}
        if not label:  # a query vector from the caller but no embedder of our own: labels by their words
            label = label_overlap(plan.query, plan.known)
        return pick_categories(label, content_scores(conn, vector, plan.scopes))

    def _ranked(self, conn: Connection, hits: Sequence[tuple[int, float]], plan: _Plan) -> list[StoredFact]:
        if not hits:
            return []
        rows = {
            int(r["id"]): r
            for r in conn.execute(
                f"select {COLUMNS} from facts where id in (select value from json_each(?)) and {CURRENT}",
                (_json([fact_id for fact_id, _ in hits]),),
            )
            if plan.keep(r["subject"])
        }
        ranked = [stored(rows[i], self._rank(score, rows[i], plan.now)) for i, score in hits if i in rows]
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
                f"select {COLUMNS} from facts where importance >= ? and {CURRENT} {scope_sql} "
                "order by importance desc, access_count desc, updated_at desc limit ?",
                (threshold, *args, limit),
            ).fetchall()
            return [stored(r) for r in rows]

        return await self.db.read(_read)

    async def recent(self, scopes: Sequence[str] | None, limit: int = 10) -> list[StoredFact]:
        scope_sql, args = _scope_filter(scopes)
        rows = await self.db.fetchall(
            f"select {COLUMNS} from facts where {CURRENT} {scope_sql} order by updated_at desc limit ?",
            (*args, limit),
        )
        return [stored(r) for r in rows]

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
        row = await self.db.fetchone(f"select count(*) from facts where {CURRENT} {scope_sql}", tuple(args))
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
        # A fact is embedded as a question is (``embed_query``): facts are short statements, compared with
        # questions and with each other symmetrically, and the category floors are set on that scale.
        return await embed_query(self.embedder, text)  # no vector is fine: FTS still finds the fact


def replaced_fact(conn: Connection, fact: Fact) -> tuple[int | None, bool]:
    """The current fact ``fact`` supersedes — the one the distiller named (same label), else the current
    fact about the same subject and attribute — if ``subjects.may_replace`` lets its speaker end it; and
    whether such an attribute fact exists that it may not end (then ``fact`` is saved without its key, next
    to it: Bob's word about Ann adds to what Ann said, it does not overwrite it)."""
    if fact.replaces is not None:
        row = conn.execute(
            f"select id, subject from facts where id = ? and scope = ? and {CURRENT}", (fact.replaces, fact.scope)
        ).fetchone()
        if row is not None and may_replace(row["subject"], fact.subject, fact.said_by):
            return int(row["id"]), False
    if not fact.key:
        return None, False
    row = conn.execute(
        f"select id from facts where scope = ? and subject = ? and category = ? and key = ? and {CURRENT}",
        (fact.scope, fact.subject, fact.category, fact.key),
    ).fetchone()
    if row is None:
        return None, False
    if may_replace(fact.subject, fact.subject, fact.said_by):
        return int(row[0]), False
    return None, True


def predecessors(conn: Connection, ids: Sequence[int]) -> list[StoredFact]:
    """Every fact the facts ``ids`` superseded, directly or through a chain, newest ending first."""
    rows = conn.execute(
        "with recursive chain(id) as ("
        " select id from facts where superseded_by in (select value from json_each(?))"
        " union select f.id from facts f join chain c on f.superseded_by = c.id"
        f") select {COLUMNS} from facts where id in chain order by valid_until desc, id desc",
        (_json(ids),),
    ).fetchall()
    return [stored(r) for r in rows]


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
