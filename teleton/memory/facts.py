"""Facts: small structured memories (category / key / value) with a scope, importance and access record.

Scopes (DESIGN §6): ``user`` (the owner's private facts), ``chat:<id>`` (facts of one chat), ``global``.
Saving skips an exact duplicate in the same scope and updates in place when the same (category, key)
is saved again, so "my cat is called X" then "... is called Y" leaves one fact. Recall is the hybrid search
over ``facts`` within the given scopes, re-ranked with an access-count boost and recency decay, and every
recalled fact has its access count bumped: what gets used stays on top.
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

from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.hybrid_search import FACTS, SearchParams, hybrid_search, vector_available
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

USER_SCOPE = "user"
GLOBAL_SCOPE = "global"


RECALL_PARAMS = SearchParams(limit=20)  # candidates re-ranked by use and freshness before the final cut


def chat_scope(chat_id: int) -> str:
    return f"chat:{chat_id}"


@dataclass(frozen=True)
class Fact:
    value: str
    category: str = "general"
    key: str | None = None
    scope: str = USER_SCOPE
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
class SaveOutcome:
    id: int
    action: str  # 'inserted' | 'updated' | 'duplicate'


def fact_hash(value: str) -> str:
    return hashlib.sha256(" ".join(value.lower().split()).encode()).hexdigest()


_COLUMNS = ("id, category, key, value, scope, source, importance, access_count, last_access, "
            "created_at, updated_at")


def _stored(row: Any, score: float = 0.0) -> StoredFact:
    return StoredFact(
        id=int(row["id"]), category=row["category"], key=row["key"], value=row["value"], scope=row["scope"],
        source=row["source"], importance=float(row["importance"]), access_count=int(row["access_count"]),
        last_access=row["last_access"], created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]), score=score,
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

    async def save(self, fact: Fact) -> SaveOutcome:
        value = fact.value.strip()
        if not value:
            raise ValueError("a fact needs a value")
        vector = await self._embed(f"{fact.category} {fact.key or ''} {value}")
        digest = fact_hash(value)
        now = time.time()

        def _save(conn: Connection) -> SaveOutcome:
            same = conn.execute("select id from facts where scope = ? and hash = ?",
                                (fact.scope, digest)).fetchone()
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
        if query_vector is None and query.strip():
            query_vector = await self._embed(query)
        now = time.time()

        def _recall(conn: Connection) -> list[StoredFact]:
            hits = hybrid_search(conn, FACTS, query, query_vector, params=self.params, scope=scopes)
            if not hits:
                return []
            ids = [hit.id for hit in hits]
            rows = {int(r["id"]): r for r in conn.execute(
                f"select {_COLUMNS} from facts where id in (select value from json_each(?))",
                (_json(ids),))}
            ranked = [_stored(rows[h.id], self._rank(h.score, rows[h.id], now)) for h in hits if h.id in rows]
            if category:
                ranked = [f for f in ranked if f.category == category]
            ranked.sort(key=lambda f: -f.score)
            return ranked[:limit]

        found = await self.db.read(_recall)
        if found:
            await self._touch([f.id for f in found], now)
        return found

    async def salient(self, scopes: Sequence[str] | None, threshold: float = 0.85,
                      limit: int = 10) -> list[StoredFact]:
        """High-importance facts, which surface in DM context without being asked for."""
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
        # Relevance decides; use and freshness only reorder close calls.
        boost = 1.0 + 0.1 * math.log1p(int(row["access_count"]))
        last = row["last_access"] or row["updated_at"]
        age_days = max(0.0, (now - float(last)) / 86400)
        decay = 0.5 ** (age_days / self.half_life_days)
        return relevance * boost * (0.7 + 0.3 * decay) * (0.8 + 0.4 * float(row["importance"]))

    async def _touch(self, ids: Sequence[int], now: float) -> None:
        await self.db.write(lambda conn: conn.execute(
            "update facts set access_count = access_count + 1, last_access = ? "
            "where id in (select value from json_each(?))", (now, _json(ids))))

    async def _embed(self, text: str) -> np.ndarray | None:
        if not self.db.vectors:
            return None
        return await embed_query(self.embedder, text)  # no vector is fine: FTS still finds the fact


def _store_vector(conn: Connection, fact_id: int, scope: str, vector: np.ndarray | None) -> None:
    if vector is None or not vector_available(conn, FACTS):
        return
    conn.execute("delete from facts_vec where id = ?", (fact_id,))
    conn.execute("insert into facts_vec(id, scope, embedding) values (?, ?, ?)",
                 (fact_id, scope, np.asarray(vector, dtype=np.float32).tobytes()))
    conn.execute("update facts set embedded = 1 where id = ?", (fact_id,))


def _scope_filter(scopes: Sequence[str] | None) -> tuple[str, list[Any]]:
    if scopes is None:
        return "", []
    return "and scope in (select value from json_each(?))", [_json(list(scopes))]


def _json(values: Sequence[Any]) -> str:
    return json.dumps(list(values))
