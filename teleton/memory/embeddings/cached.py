"""A caching wrapper that is itself a provider: vectors are kept in the ``embedding_cache`` table.

Keyed by (model id, SHA-256 of the text), so two models never share an entry. Rules (docs/memory.md):
- TTL: an entry computed more than ``ttl_days`` ago is not used (and is purged); the text is re-embedded.
- Size: at most ``max_entries`` rows; beyond that the least recently used rows are evicted.
- LRU: a hit refreshes the entry's ``last_access``.
Only texts that miss go to the wrapped provider, in one call.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from teleton.config.schema import EmbeddingConfig, default
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import query_embedding
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

DAY = 86_400.0
QUERY_KEY = "\x00query\x00"  # a question's vector differs from the same text's as a passage (e5)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompted_queries(provider: EmbeddingProvider) -> bool:
    """Whether ``provider`` embeds a question otherwise than the same text to be stored: its query prompt is
    not its document prompt (a model with only a document prompt included)."""
    return getattr(provider, "query_prompt", "") != getattr(provider, "document_prompt", "")


class CachedProvider:
    def __init__(
        self,
        inner: EmbeddingProvider,
        db: Database,
        *,
        ttl_days: float = default(EmbeddingConfig, "cache_ttl_days"),
        max_entries: int = default(EmbeddingConfig, "cache_max_entries"),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dims = inner.dims
        self._db = db
        self._ttl = ttl_days * DAY
        self._max = max_entries
        self._clock = clock
        self.hits = 0
        self.misses = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await self._embed(list(texts), self.inner.embed, "")

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not prompted_queries(self.inner):  # a question is embedded as any text: one entry serves both
            return await self.embed(texts)
        return await self._embed(list(texts), query_embedding(self.inner), QUERY_KEY)

    async def _embed(
        self, texts: list[str], compute: Callable[[list[str]], Awaitable[np.ndarray]], key: str
    ) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return out
        hashes = [text_hash(key + t) for t in texts]
        now = self._clock()
        found = await self._db.read(lambda conn: self._lookup(conn, sorted(set(hashes)), now))
        missing: dict[str, list[int]] = {}
        for i, h in enumerate(hashes):
            if h in found:
                out[i] = found[h]
            else:
                missing.setdefault(h, []).append(i)
        self.hits += len(texts) - sum(len(v) for v in missing.values())
        self.misses += sum(len(v) for v in missing.values())
        fresh: dict[str, np.ndarray] = {}
        if missing:
            vectors = await compute([texts[idx[0]] for idx in missing.values()])
            for (h, idx), vector in zip(missing.items(), vectors, strict=True):
                out[idx] = vector
                fresh[h] = vector
        await self._db.write(lambda conn: self._store(conn, list(found), fresh, now))
        return out

    def _lookup(self, conn: Connection, hashes: list[str], now: float) -> dict[str, np.ndarray]:
        rows = conn.execute(
            "select hash, embedding from embedding_cache "
            "where model = ? and dims = ? and created_at >= ? and hash in (select value from json_each(?))",
            (self.model_id, self.dims, now - self._ttl, json.dumps(hashes)),
        ).fetchall()
        return {str(h): np.frombuffer(blob, dtype=np.float32).copy() for h, blob in rows}

    def _store(self, conn: Connection, touched: list[str], fresh: dict[str, np.ndarray], now: float) -> None:
        if touched:
            conn.execute(
                "update embedding_cache set last_access = ? "
                "where model = ? and hash in (select value from json_each(?))",
                (now, self.model_id, json.dumps(touched)),
            )
        for h, vector in fresh.items():
            conn.execute(
                "insert into embedding_cache(model, hash, dims, embedding, created_at, last_access) "
                "values (?, ?, ?, ?, ?, ?) on conflict(model, hash) do update set "
                "dims = excluded.dims, embedding = excluded.embedding, "
                "created_at = excluded.created_at, last_access = excluded.last_access",
                (self.model_id, h, self.dims, np.asarray(vector, dtype=np.float32).tobytes(), now, now),
            )
        if fresh:
            prune(conn, now - self._ttl, self._max)


def prune(conn: Connection, expired_before: float, max_entries: int) -> int:
    """Drop expired entries, then the least recently used beyond ``max_entries``; return rows removed."""
    removed = conn.execute("delete from embedding_cache where created_at < ?", (expired_before,)).rowcount
    (count,) = conn.execute("select count(*) from embedding_cache").fetchone()
    if count > max_entries:
        removed += conn.execute(
            "delete from embedding_cache where (model, hash) in ("
            "select model, hash from embedding_cache order by last_access, created_at limit ?)",
            (count - max_entries,),
        ).rowcount
    return int(removed)
