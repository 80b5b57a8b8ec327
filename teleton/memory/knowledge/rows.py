"""The one writer of knowledge rows: a file's chunks brought in line with its plan, and entries that come
from no file (``store_entry``). Every row's hash is ``chunk_hash``: label, heading path and text."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from teleton.memory.knowledge.chunker import MAX_CHARS, TARGET_CHARS, chunk_markdown
from teleton.memory.search.corpora import KNOWLEDGE
from teleton.memory.search.vector_store import delete_vectors
from teleton.privacy import OWNER, is_label
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

SOURCES = ("memory", "session", "learned")


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
        delete_rows(conn, [s.id for s in stored[path]])
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
        if has_vectors(conn):  # its vector sits in the old label's partition
            delete_vectors(conn, KNOWLEDGE, [row.id])
        counts.updated += 1
    for chunk in fresh[len(vanished) :]:
        insert_row(conn, "memory", chunk, now)
        counts.added += 1
    leftover = vanished[len(fresh) :]
    delete_rows(conn, [row.id for row in leftover])
    counts.removed += len(leftover)


def insert_row(conn: Connection, source: str, chunk: PlannedChunk, now: float) -> int:
    cur = conn.execute(
        "insert into knowledge(source, path, heading, text, hash, start_line, label, created_at, updated_at) "
        "values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (source, chunk.path, chunk.heading, chunk.text, chunk.hash, chunk.start_line, chunk.label, now, now),
    )
    return int(cur.lastrowid)


def delete_rows(conn: Connection, ids: Sequence[int]) -> None:
    if not ids:
        return
    if has_vectors(conn):
        delete_vectors(conn, KNOWLEDGE, ids)
    conn.executemany("delete from knowledge where id = ?", [(i,) for i in ids])


def has_vectors(conn: Connection) -> bool:
    try:
        conn.execute("select vec_version()").fetchone()
    except Exception:
        return False
    return conn.execute("select 1 from sqlite_master where name = 'knowledge_vec'").fetchone() is not None


async def store_entry(
    db: Database,
    text: str,
    *,
    source: str,
    path: str,
    label: str,
    heading: str = "",
    target: int = TARGET_CHARS,
    limit: int = MAX_CHARS,
) -> list[int]:
    """Store text that does not come from a file (a session summary, a thing learned), chunked like a file
    and labelled ``label`` (the writing turn's); return the row ids. An identical entry (same source, path,
    label and text) is stored once, so a retried write adds nothing. Its rows wait for an embedding
    (``embedded = 0``) and are keyword-searchable at once."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
    if not is_label(label):
        raise ValueError(f"not a privacy label: {label!r}")
    planned = []
    for chunk in chunk_markdown(text, target, limit):
        body = chunk.text.strip()
        context = " > ".join(p for p in (heading, chunk.heading) if p)
        if body:
            planned.append(PlannedChunk(path, context, body, chunk_hash(context, body, label), chunk.start_line, label))

    def write(conn: Connection) -> list[int]:
        now, ids = time.time(), []
        for chunk in planned:
            row = conn.execute(
                "select id from knowledge where source = ? and path = ? and hash = ?", (source, path, chunk.hash)
            ).fetchone()
            ids.append(int(row[0]) if row else insert_row(conn, source, chunk, now))
        return ids

    return await db.write(write)
