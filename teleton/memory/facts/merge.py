"""Near-duplicate facts: "Ana's birthday is 3 May" and "Ana has her birthday on May 3" are one fact.

The distiller sees the same fact phrased anew in many conversations. An exact duplicate is skipped by the
fact store; a near duplicate (cosine >= threshold within the same scope) replaces the older wording, so
the store converges instead of accumulating paraphrases. The scope is part of the vector query (partition
key), so a fact from one chat never merges into another chat's fact.
"""

from __future__ import annotations

import time

import numpy as np

from teleton.memory.embeddings.query import embed_query
from teleton.memory.facts.rows import current_duplicate, embedding_text, fact_hash
from teleton.memory.facts.store import Fact, FactStore, SaveOutcome
from teleton.memory.search.corpora import CURRENT, FACTS
from teleton.memory.search.vector_leg import vector_available
from teleton.storage.sqlite_driver import Connection

NEAR_DUPLICATE = 0.95
_NEIGHBOURS = 3


def nearest_in_scope(conn: Connection, scope: str, subject: str, vector: np.ndarray) -> tuple[int, float] | None:
    """The most similar current fact of ``scope`` about ``subject`` and its cosine similarity, or None.
    ("Ann loves pizza" and "Bob loves pizza" are near in meaning and must stay two facts.)"""
    if not vector_available(conn, FACTS):
        return None
    query = np.asarray(vector, dtype=np.float32)
    rows = conn.execute(
        "select v.id, v.embedding from facts_vec v join facts f on f.id = v.id "
        f"where v.embedding match ? and v.k = ? and v.scope = ? and f.subject = ? and f.{CURRENT}",
        (query.tobytes(), _NEIGHBOURS, scope, subject),
    ).fetchall()
    best: tuple[int, float] | None = None
    for row in rows:
        stored = np.frombuffer(row[1], dtype=np.float32)
        if stored.shape != query.shape:
            continue
        cosine = float(np.dot(stored, query) / (np.linalg.norm(stored) * np.linalg.norm(query) or 1.0))
        if best is None or cosine > best[1]:
            best = (int(row[0]), cosine)
    return best


async def save_merging(store: FactStore, fact: Fact, threshold: float = NEAR_DUPLICATE) -> SaveOutcome:
    """Save ``fact``; an exact duplicate is skipped, a near duplicate in the same scope is updated in place."""
    value = fact.value.strip()
    if store.embedder is None or not store.db.vectors or not value:
        return await store.save(fact)
    # A provider that fails (a remote one may be down) costs the merge, never the fact: save plainly.
    vector = await embed_query(store.embedder, embedding_text(fact.category, fact.key, value))
    if vector is None:
        return await store.save(fact)
    digest = fact_hash(value)

    def _merge(conn: Connection) -> SaveOutcome | None:
        exact = current_duplicate(conn, fact, digest)
        if exact is not None:
            return SaveOutcome(exact, "duplicate")
        near = nearest_in_scope(conn, fact.scope, fact.subject, vector)
        if near is None or near[1] < threshold:
            return None
        fact_id = near[0]
        conn.execute(
            "update facts set value = ?, hash = ?, importance = max(importance, ?), updated_at = ? where id = ?",
            (value, digest, fact.importance, time.time(), fact_id),
        )
        conn.execute("delete from facts_vec where id = ?", (fact_id,))
        conn.execute(
            "insert into facts_vec(id, scope, embedding) values (?, ?, ?)",
            (fact_id, fact.scope, np.asarray(vector, dtype=np.float32).tobytes()),
        )
        return SaveOutcome(fact_id, "updated")

    merged = await store.db.write(_merge)
    return merged if merged is not None else await store.save(fact)
