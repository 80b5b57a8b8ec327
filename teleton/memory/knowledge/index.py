"""The knowledge base: ``MEMORY.md``, ``memory/*.md`` and ``public/**/*.md`` of the workspace, chunked,
hashed, labelled and indexed.

``reindex()`` compares each file's chunks (SHA-256 of heading path + text) with the stored rows of that
file: unchanged chunks are left alone (no write, no embedding), changed ones are updated in place, new ones
added and vanished ones deleted; then only rows still marked ``embedded = 0`` are embedded — which also
covers a vector index dropped because the embedding model changed. ``add_entry`` stores text that does
not come from a file (session summaries, things learned), ``search`` runs the hybrid search, and
``watch()`` follows the files while the daemon runs (an edit is searchable within about a second).

Rows with ``source = 'memory'`` belong to the files; rows of the other sources are never touched by a
reindex. Every row carries a privacy label (``teleton.privacy``): a file's chunks the label of its real path
(``public/**`` public, the rest the owner's), an entry the label of the turn that wrote it. A file whose real
path lies outside the workspace (a symlink out) is refused, and a binary or non-UTF-8 file skipped, each
with one log line.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from teleton.memory.embeddings.model_files import search_weights
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.knowledge.chunker import MAX_CHARS, TARGET_CHARS, chunk_markdown
from teleton.memory.search.corpora import KNOWLEDGE
from teleton.memory.search.hybrid import DEFAULT_PARAMS, SearchHit, SearchParams, hybrid_search_db
from teleton.memory.search.vector_store import check_model, delete_vectors, write_vectors
from teleton.privacy import OWNER, Principals, is_label, path_label
from teleton.storage.database import Database
from teleton.storage.private_files import Unreadable, read_confined
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)

SOURCES = ("memory", "session", "learned")
Progress = Callable[[int, int], None]
EMBED_BATCH = 64
PROGRESS_EVERY_S = 10.0  # a progress line while embedding (the log is all a service or a pipe shows)


@dataclass
class IndexCounts:
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    embedded: int = 0
    files: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class PlannedChunk:
    path: str
    heading: str
    text: str
    hash: str
    start_line: int
    label: str = OWNER


def chunk_hash(heading: str, text: str, label: str = OWNER) -> str:
    # The heading path is part of what gets embedded, so a moved chunk is a changed chunk; the label is
    # part of the row's identity, so a file made public (or private again) is re-labelled everywhere.
    return hashlib.sha256(f"{label}\n{heading}\n{text}".encode()).hexdigest()


def embedding_text(heading: str, text: str) -> str:
    return f"{heading}\n{text}" if heading else text


PUBLIC_DIR = "public"


def knowledge_files(workspace: Path) -> list[Path]:
    files = [workspace / "MEMORY.md"] if (workspace / "MEMORY.md").is_file() else []
    memory_dir = workspace / "memory"
    if memory_dir.is_dir():
        files += sorted(p for p in memory_dir.glob("*.md") if p.is_file())
    public_dir = workspace / PUBLIC_DIR
    if public_dir.is_dir():
        files += sorted(p for p in public_dir.rglob("*.md") if p.is_file())
    return files


def plan_file(
    workspace: Path,
    path: Path,
    target: int,
    limit: int,
    *,
    principals: Principals | None = None,
    shared: Sequence[str] = (),
) -> list[PlannedChunk]:
    rel = path.relative_to(workspace).as_posix()
    text, real_rel = read_confined(workspace, path)
    # The label follows where the content really is: public/x.md -> ../MEMORY.md stays the owner's.
    label = path_label(real_rel, principals or Principals(), shared)
    planned = []
    for chunk in chunk_markdown(text, target, limit):
        body = chunk.text.strip()
        if body:
            digest = chunk_hash(chunk.heading, body, label)
            planned.append(PlannedChunk(rel, chunk.heading, body, digest, chunk.start_line, label))
    return planned


@dataclass
class _Stored:
    id: int
    hash: str
    start_line: int


def apply_plan(conn: Connection, plans: dict[str, list[PlannedChunk]], now: float) -> IndexCounts:
    """Bring the ``memory`` rows in line with ``plans`` (path -> chunks); paths not in it are removed."""
    counts = IndexCounts(files=len(plans))
    stored: dict[str, list[_Stored]] = {}
    for row in conn.execute("select id, path, hash, start_line from knowledge where source = 'memory' order by id"):
        stored.setdefault(row[1], []).append(_Stored(int(row[0]), str(row[2]), int(row[3])))
    for path in set(stored) - set(plans):
        _delete(conn, [s.id for s in stored[path]])
        counts.removed += len(stored[path])
    for path, chunks in plans.items():
        _apply_file(conn, path, chunks, stored.get(path, []), now, counts)
    return counts


def _apply_file(
    conn: Connection, path: str, chunks: list[PlannedChunk], old: list[_Stored], now: float, counts: IndexCounts
) -> None:
    by_hash: dict[str, list[_Stored]] = {}
    for row in old:
        by_hash.setdefault(row.hash, []).append(row)
    fresh: list[PlannedChunk] = []
    for chunk in chunks:
        same = by_hash.get(chunk.hash)
        if same:
            row = same.pop(0)
            counts.unchanged += 1
            if row.start_line != chunk.start_line:
                conn.execute("update knowledge set start_line = ? where id = ?", (chunk.start_line, row.id))
        else:
            fresh.append(chunk)
    vanished = [row for rows in by_hash.values() for row in rows]
    # A changed chunk reuses a vanished row (an update); the rest are plain inserts and deletes.
    for chunk, row in zip(fresh, vanished, strict=False):
        conn.execute(
            "update knowledge set heading = ?, text = ?, hash = ?, start_line = ?, label = ?, embedded = 0, "
            "updated_at = ? where id = ?",
            (chunk.heading, chunk.text, chunk.hash, chunk.start_line, chunk.label, now, row.id),
        )
        if _has_vectors(conn):  # its vector sits in the old label's partition
            delete_vectors(conn, KNOWLEDGE, [row.id])
        counts.updated += 1
    for chunk in fresh[len(vanished) :]:
        _insert(conn, "memory", chunk, now)
        counts.added += 1
    leftover = vanished[len(fresh) :]
    _delete(conn, [row.id for row in leftover])
    counts.removed += len(leftover)


def _insert(conn: Connection, source: str, chunk: PlannedChunk, now: float) -> int:
    cur = conn.execute(
        "insert into knowledge(source, path, heading, text, hash, start_line, label, created_at, updated_at) "
        "values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (source, chunk.path, chunk.heading, chunk.text, chunk.hash, chunk.start_line, chunk.label, now, now),
    )
    return int(cur.lastrowid)


def _delete(conn: Connection, ids: Sequence[int]) -> None:
    if not ids:
        return
    if _has_vectors(conn):
        delete_vectors(conn, KNOWLEDGE, ids)
    conn.executemany("delete from knowledge where id = ?", [(i,) for i in ids])


def _has_vectors(conn: Connection) -> bool:
    try:
        conn.execute("select vec_version()").fetchone()
    except Exception:
        return False
    return conn.execute("select 1 from sqlite_master where name = 'knowledge_vec'").fetchone() is not None


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
        cls, db: Database, config: Any, provider: EmbeddingProvider | None, principals: Principals | None = None
    ) -> KnowledgeIndex:
        memory = config.memory
        weights = search_weights(config.embedding, memory)
        return cls(
            principals=principals or Principals.from_telegram(config.telegram),
            shared=tuple(config.privacy.shared_paths),
            db=db,
            workspace=Path(config.storage.workspace).expanduser(),
            provider=provider if db.vectors else None,
            chunk_target=memory.chunk_target,
            chunk_max=memory.chunk_max,
            max_file_bytes=memory.max_file_bytes,
            skip_large=memory.large_files == "skip",
            params=SearchParams(
                vector_weight=weights[0],
                keyword_weight=weights[1],
                vector_candidates=memory.vector_candidates,
                limit=memory.result_limit,
                min_score=memory.min_score,
            ),
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
        """Store text that does not come from a file (chunked like a file), labelled ``label`` (the writing
        turn's); return the row ids. An identical entry (same source, path, label and text) is stored once.
        """
        if source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
        if not is_label(label):
            raise ValueError(f"not a privacy label: {label!r}")
        planned = []
        for chunk in chunk_markdown(text, self.chunk_target, self.chunk_max):
            body = chunk.text.strip()
            context = " > ".join(p for p in (heading, chunk.heading) if p)
            if body:
                digest = chunk_hash(context, body, label)
                planned.append(PlannedChunk(path, context, body, digest, chunk.start_line, label))

        def _write(conn: Connection) -> list[int]:
            now, ids = time.time(), []
            for chunk in planned:
                row = conn.execute(
                    "select id from knowledge where source = ? and path = ? and hash = ?", (source, path, chunk.hash)
                ).fetchone()
                ids.append(int(row[0]) if row else _insert(conn, source, chunk, now))
            return ids

        ids = await self.db.write(_write)
        await self.embed_pending()
        return ids

    async def remove_entries(self, ids: Sequence[int]) -> None:
        await self.db.write(lambda conn: _delete(conn, list(ids)))

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
            total += await self.db.write(lambda conn, r=rows, v=vectors, m=model: _store_vectors(conn, r, v, m))

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

    def watch(self, debounce_ms: int = 500, supervisor: Any = None) -> Any:
        """Follow the files while the daemon runs (a ``KnowledgeWatcher``; ``await stop()`` ends it)."""
        from teleton.memory.knowledge.watch import KnowledgeWatcher

        watcher = KnowledgeWatcher(self, debounce_ms)
        watcher.start(supervisor)
        return watcher


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
