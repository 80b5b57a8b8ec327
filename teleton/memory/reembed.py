"""Catching up on rows without a vector: after a model change, or rows written while embeddings were down.

When the configured model differs from the one the vector index was built with, the storage layer drops
the vector tables and marks every row ``embedded = 0`` (``vector_tables.ensure_vector_tables``); nothing is ever
searched against vectors of two models. ``reembed_all`` then rebuilds the index in the background: the
knowledge base, the feed and the facts (tool RAG re-embeds its own rows when it syncs the tool list).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import structlog

from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import query_embedding
from teleton.memory.facts.rows import embedding_text
from teleton.memory.feed.embedding import embed_pending
from teleton.memory.search.corpora import CURRENT, FACTS
from teleton.memory.search.vector_store import check_model, write_vectors
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)


async def embed_pending_facts(db: Database, provider: EmbeddingProvider, batch: int = 64) -> int:
    """Embed facts with ``embedded = 0``; return how many got a vector."""
    if not db.vectors:
        return 0
    total = 0
    while True:
        rows = await db.read(
            lambda conn: conn.execute(
                f"select id, category, key, value, scope from facts where embedded = 0 and {CURRENT} "
                "order by id limit ?",
                (batch,),
            ).fetchall()
        )
        if not rows:
            return total
        # Facts are embedded as FactStore.save embeds them: as questions are (see ``query_embedding``).
        vectors = await query_embedding(provider)([embedding_text(r["category"], r["key"], r["value"]) for r in rows])
        model = (provider.model_id, provider.dims)
        total += await db.write(partial(_store_facts, rows=rows, vectors=vectors, model=model))


def _store_facts(conn: Connection, rows: list[Any], vectors: np.ndarray, model: tuple[str, int]) -> int:
    check_model(conn, *model)
    done = []
    for row, vector in zip(rows, vectors, strict=True):
        current = conn.execute(f"select value, scope from facts where id = ? and {CURRENT}", (row["id"],)).fetchone()
        if current is not None and tuple(current) == (row["value"], row["scope"]):
            done.append((int(row["id"]), row["scope"], vector))
    write_vectors(conn, FACTS, done)
    conn.executemany("update facts set embedded = 1 where id = ?", [(d[0],) for d in done])
    return len(done)


async def reembed_all(db: Database, provider: EmbeddingProvider | None, knowledge: Any = None) -> dict[str, int]:
    """Embed every pending row of the knowledge base (if given), the feed and the facts."""
    if provider is None or not db.vectors:
        return {}
    counts = {
        "knowledge": await knowledge.embed_pending() if knowledge is not None else 0,
        "feed": await embed_pending(db, provider),
        "facts": await embed_pending_facts(db, provider),
    }
    if any(counts.values()):
        log.info("reembedded", **counts)
    return counts
