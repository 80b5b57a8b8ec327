"""The knowledge base: ``MEMORY.md`` and the ``.md`` files under ``memory/`` and ``public/`` (``files``), chunked,
hashed, labelled and indexed (docs/memory.md, "Knowledge base").

``reindex()`` writes and embeds only the chunks that changed (SHA-256 of heading path + text), then every row
still at ``embedded = 0`` (a vector index dropped for a new model included); rows not from the files
(``add_entry``: summaries, things learned) are never touched by it. ``watch()`` follows the files while the
daemon runs. A file's chunks carry the label of its real path, an entry that of the turn that wrote it; a
symlink out of the workspace is refused and a non-text file skipped, each with one log line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from teleton.config.schema import Config
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.knowledge.chunker import MAX_CHARS, TARGET_CHARS
from teleton.memory.knowledge.files import knowledge_files, plan_file
from teleton.memory.knowledge.rows import (
    IndexCounts,
    PlannedChunk,
    apply_plan,
    delete_rows,
    embedding_text,
    store_entry,
)
from teleton.memory.search.corpora import KNOWLEDGE
from teleton.memory.search.hybrid import DEFAULT_PARAMS, SearchHit, SearchParams, configured_params, hybrid_search_db
from teleton.memory.search.vector_store import check_model, write_vectors
from teleton.privacy import Principals
from teleton.storage.database import Database
from teleton.storage.private_files import Unreadable
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)

Progress = Callable[[int, int], None]
EMBED_BATCH = 64
PROGRESS_EVERY_S = 10.0  # a progress line while embedding (the log is all a service or a pipe shows)


@dataclass
class KnowledgeIndex:
    db: Database
    workspace: Path
    provider: EmbeddingProvider | None = None
    chunk_target: int = TARGET_CHARS
    chunk_max: int = MAX_CHARS
    params: SearchParams = DEFAULT_PARAMS
    principals: Principals = field(default_factory=Principals)
    shared: tuple[str, ...] = ()  # privacy.shared_paths: workspace files the owner made public
    max_file_bytes: int = 2_000_000  # memory.max_file_bytes: a larger file is indexed with a warning, or
    skip_large: bool = False  # skipped (memory.large_files: skip)
    clock: Callable[[], float] = time.monotonic
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _refused: set[tuple[str, str]] = field(default_factory=set, repr=False)

    @classmethod
    def from_config(
        cls, db: Database, config: Config, provider: EmbeddingProvider | None, principals: Principals | None = None
    ) -> KnowledgeIndex:
        memory = config.memory
        return cls(
            principals=principals or Principals.from_telegram(config.telegram),
            shared=tuple(config.privacy.shared_paths),
            db=db,
            workspace=config.storage.workspace_dir,
            provider=provider if db.vectors else None,
            chunk_target=memory.chunk_target,
            chunk_max=memory.chunk_max,
            max_file_bytes=memory.max_file_bytes,
            skip_large=memory.large_files == "skip",
            params=configured_params(config),
        )

    async def reindex(self, progress: Progress | None = None) -> IndexCounts:
        """Sync the index with the files; embed what is new or changed. Safe to call concurrently.

        ``progress(done, total)`` is called as rows are embedded (the CLI draws its bar with it).
        """
        async with self._lock:
            started = time.perf_counter()
            plans = await asyncio.to_thread(self._plan)
            counts = await self.db.write(lambda conn: apply_plan(conn, plans, time.time()))
            counts.embedded = await self.embed_pending(progress=progress)
            if counts.added or counts.updated or counts.removed:
                log.info("knowledge_reindexed", ms=round((time.perf_counter() - started) * 1000), **counts.as_dict())
            return counts

    def _plan(self) -> dict[str, list[PlannedChunk]]:
        plans = {}
        for path in knowledge_files(self.workspace):
            rel = path.relative_to(self.workspace).as_posix()
            try:
                if not self._size_ok(path, rel):
                    continue
                plans[rel] = plan_file(
                    self.workspace,
                    path,
                    self.chunk_target,
                    self.chunk_max,
                    principals=self.principals,
                    shared=self.shared,
                )
            except FileNotFoundError:  # deleted between listing and reading: it is gone, like its rows
                continue
            except (Unreadable, OSError) as exc:
                self._warn_once("knowledge_file_skipped", rel, str(exc))
        return plans

    def _size_ok(self, path: Path, rel: str) -> bool:
        size = path.stat().st_size
        if size <= self.max_file_bytes:
            return True
        why = f"{size / 1e6:.1f} MB, over memory.max_file_bytes ({self.max_file_bytes / 1e6:.1f} MB)"
        self._warn_once("knowledge_file_skipped" if self.skip_large else "knowledge_file_large", rel, why)
        return not self.skip_large

    def _warn_once(self, event: str, rel: str, reason: str) -> None:
        if (rel, reason) not in self._refused:  # one line per file, not one per re-index
            self._refused.add((rel, reason))
            log.warning(event, path=rel, reason=reason)

    async def add_entry(
        self, text: str, source: str = "learned", path: str = "", heading: str = "", *, label: str
    ) -> list[int]:
        """Store text that does not come from a file (``rows.store_entry``) and embed it."""
        ids = await store_entry(
            self.db, text, source=source, path=path, heading=heading, label=label,
            target=self.chunk_target, limit=self.chunk_max,
        )  # fmt: skip
        await self.embed_pending()
        return ids

    async def remove_entries(self, ids: Sequence[int]) -> None:
        await self.db.write(lambda conn: delete_rows(conn, list(ids)))

    async def embed_pending(self, batch: int = EMBED_BATCH, progress: Progress | None = None) -> int:
        """Embed knowledge rows with ``embedded = 0``; return how many got a vector."""
        if self.provider is None or not self.db.vectors:
            return 0
        provider, total = self.provider, 0
        pending = (await self.db.fetchone("select count(*) from knowledge where embedded = 0"))[0]
        logged = self.clock()
        while True:
            if progress is not None:
                progress(total, max(pending, total))
            if (now := self.clock()) - logged >= PROGRESS_EVERY_S:
                logged = now
                log.info("knowledge_embedding", done=total, total=max(pending, total))
            rows = await self.db.read(
                lambda conn: conn.execute(
                    "select id, label, heading, text, hash from knowledge where embedded = 0 order by id limit ?",
                    (batch,),
                ).fetchall()
            )
            if not rows:
                return total
            vectors = await provider.embed([embedding_text(r["heading"], r["text"]) for r in rows])
            model = (provider.model_id, provider.dims)
            total += await self.db.write(partial(_store_vectors, rows=rows, vectors=vectors, model=model))

    async def search(
        self,
        query: str,
        *,
        labels: Sequence[str] | None,
        sources: Sequence[str] | None = None,
        limit: int | None = None,
        query_vector: np.ndarray | None = None,
    ) -> list[SearchHit]:
        """Hybrid search over the knowledge rows of ``labels`` (a clearance's ``readable()``; None = all),
        optionally only of some sources (a filter on the results: sources are few and broad)."""
        if query_vector is None and self.db.vectors:
            query_vector = await embed_query(self.provider, query)
        wanted = limit or self.params.limit
        params = SearchParams(**{**asdict(self.params), "limit": wanted if sources is None else wanted * 4})
        scope = None if labels is None else list(labels)
        hits = await hybrid_search_db(self.db, KNOWLEDGE, query, query_vector, params=params, scope=scope)
        if sources is not None:
            hits = [h for h in hits if h.meta["source"] in sources]
        return hits[:wanted]


def _store_vectors(conn: Connection, rows: list[Any], vectors: np.ndarray, model: tuple[str, int]) -> int:
    check_model(conn, *model)
    done = []
    for row, vector in zip(rows, vectors, strict=True):
        # Only if the row still holds the text we embedded (an edit meanwhile leaves it pending).
        if conn.execute("select 1 from knowledge where id = ? and hash = ?", (row["id"], row["hash"])).fetchone():
            done.append((int(row["id"]), row["label"], vector))
    write_vectors(conn, KNOWLEDGE, done)
    conn.executemany("update knowledge set embedded = 1 where id = ?", [(d[0],) for d in done])
    return len(done)
