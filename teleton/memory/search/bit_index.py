"""An in-memory index of a float16 vector table, for nearest-neighbour search across all chats.

At 100k messages an exact float scan in sqlite-vec takes ~340 ms and its bit-vector KNN slows with k
(~120 ms for 600 candidates); reading 1,000 float16 rows back from SQLite alone costs ~4 ms. So the index
holds two compact copies of every vector in numpy: its sign bits (48 B at 384 dims), scanned by Hamming
distance in ~1.5 ms at 100k, and an int8 copy with a per-row scale (~dims bytes), which re-ranks the
``OVERSAMPLE`` x k nearest codes in ~1 ms. The best 2k by that score are then read as float16 from the
table and the exact top k returned, with exact cosines. At 100k, the share of the exact top 30 found: 0.998 on
the bench's archive (`scripts/bench_search.py`), 0.977 on the test's harder one
(`tests/memory/test_all_chat_vectors.py`). Memory at 100k rows of 384 dims: 45 MB of arrays, ~60 MB resident.

The table (``vector_tables.HALF_VECTOR_TABLE``) numbers every write with an AUTOINCREMENT ``seq``, so each search
first loads only the rows written since the index last looked. A re-written row is overwritten in place.
A deleted row stays in memory and is dropped when its float16 row is not found; when such misses pile up
the index is rebuilt. A table recreated for a new model has a new ``index_id`` (meta), hence a new index.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import numpy as np

from teleton.storage.sqlite_driver import Connection
from teleton.storage.vector_tables import get_meta

# Codes re-ranked with the int8 copy per wanted result. Recall@30 at 100k, test / bench archive: x20 - / 0.955,
# x40 0.93 / 0.988, x60 0.96 / -, x80 0.977 / 0.998.
OVERSAMPLE = 80
# A rebuild drops stale rows once this share of a search's final reads no longer found a vector.
STALE_SHARE = 0.1
LOAD_BATCH = 4_000  # rows read per query while loading: the temporaries of a bigger batch stay in the heap
_MAX_INDEXES = 8  # one per open database and table; a process opening many (tests) drops the oldest


@dataclass(frozen=True)
class _Arrays:
    """One consistent view for readers: only the first ``size`` rows (columns of ``bits``) are filled."""

    bits: np.ndarray  # (words, capacity) uint64: word-major, so the scan runs over contiguous memory
    int8: np.ndarray  # (capacity, dims) int8
    scale: np.ndarray  # (capacity,) float32: row ~= int8 * scale
    ids: np.ndarray  # (capacity,) int64
    size: int


_EMPTY = _Arrays(
    np.zeros((0, 0), np.uint64), np.zeros((0, 0), np.int8), np.zeros(0, np.float32), np.zeros(0, np.int64), 0
)


class BitIndex:
    """Compact copies of one table's vectors; safe for concurrent readers (one refresh at a time)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._lock = threading.Lock()
        self._arrays = _EMPTY
        self._seen_seq = 0
        self._stale = False

    def __len__(self) -> int:
        return self._arrays.size

    def refresh(self, conn: Connection) -> None:
        """Load the rows written since the last refresh (all of them after a rebuild)."""
        # A reader whose snapshot is older than the index's may see a smaller seq: that is not a reset (a
        # recreated table has a new index_id, hence a new index), so only a larger one means new rows.
        last = conn.execute(f"select seq from {self.table} order by seq desc limit 1").fetchone()
        if (int(last[0]) if last else 0) <= self._seen_seq and not self._stale:
            return
        with self._lock:
            if self._stale:
                self._arrays, self._seen_seq, self._stale = _EMPTY, 0, False
            # Sized once for the whole first load: growing step by step leaves every old copy in the heap.
            expect = 0 if self._seen_seq else int(conn.execute(f"select count(*) from {self.table}").fetchone()[0])
            while True:
                rows = conn.execute(
                    f"select seq, id, vector from {self.table} where seq > ? order by seq limit ?",
                    (self._seen_seq, LOAD_BATCH),
                ).fetchall()
                if not rows:
                    break
                vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float16).reshape(len(rows), -1)
                self._add([int(r[1]) for r in rows], vectors.astype(np.float32), expect)
                self._seen_seq = int(rows[-1][0])

    def candidates(self, query: np.ndarray, k: int) -> np.ndarray:
        """Ids of the ``2 k`` best rows for ``query``: the nearest codes, re-ranked by the int8 copy."""
        a = self._arrays
        if a.size == 0:
            return a.ids[:0]
        code = _bits(query[None, :])[0]
        distance = np.bitwise_count(a.bits[0, : a.size] ^ code[0]).astype(np.int32)
        for word in range(1, a.bits.shape[0]):
            distance += np.bitwise_count(a.bits[word, : a.size] ^ code[word])
        near = np.arange(a.size)
        if k * OVERSAMPLE < a.size:
            near = np.argpartition(distance, k * OVERSAMPLE - 1)[: k * OVERSAMPLE]
        score = (a.int8[near].astype(np.float32) @ query) * a.scale[near]
        best = near[np.argsort(-score)[: 2 * k]]
        return a.ids[best]

    def note_missing(self, missing: int, asked: int) -> None:
        if asked and missing / asked > STALE_SHARE:
            self._stale = True

    def invalidate(self) -> None:
        """Rebuild at the next refresh: rows erased on purpose (``memory.forget``) leave no copy in memory."""
        self._stale = True

    def _add(self, ids: list[int], vectors: np.ndarray, expect: int = 0) -> None:
        a = self._arrays
        bits, int8, scale, all_ids, size = a.bits, a.int8, a.scale, a.ids, a.size
        at = _positions(all_ids[:size], np.asarray(ids, np.int64))
        new = int((at < 0).sum())
        at[at < 0] = np.arange(size, size + new)
        if size + new > len(all_ids):
            # A quarter spare, not double: the int8 copy is most of the memory.
            capacity = max(1024, expect + expect // 8, (size + new) * 5 // 4)
            grown = _Arrays(
                np.zeros((-(-vectors.shape[1] // 64), capacity), np.uint64),
                np.zeros((capacity, vectors.shape[1]), np.int8),
                np.zeros(capacity, np.float32),
                np.zeros(capacity, np.int64),
                size,
            )
            if size:  # the first load has nothing to copy (and no width yet)
                grown.bits[:, :size], grown.int8[:size] = bits[:, :size], int8[:size]
                grown.scale[:size], grown.ids[:size] = scale[:size], all_ids[:size]
            bits, int8, scale, all_ids = grown.bits, grown.int8, grown.scale, grown.ids
        size += new
        all_ids[at] = ids
        bits[:, at] = _bits(vectors).T
        row_scale = np.maximum(np.abs(vectors).max(axis=1), 1e-12) / 127.0
        int8[at] = np.round(vectors / row_scale[:, None]).astype(np.int8)
        scale[at] = row_scale
        # Readers take the arrays whole: a search never sees a count past the rows filled.
        self._arrays = _Arrays(bits, int8, scale, all_ids, size)


def _positions(known: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where each of ``ids`` is in ``known`` (a re-embedded row), -1 for a new one. A sort per refresh
    instead of an id -> position dict, which would cost ~10 MB per 100k rows."""
    at = np.full(len(ids), -1, np.int64)
    if len(known) == 0:
        return at
    order = np.argsort(known, kind="stable")
    slot = np.minimum(np.searchsorted(known[order], ids), len(known) - 1)
    found = known[order][slot] == ids
    at[found] = order[slot[found]]
    return at


def _bits(vectors: np.ndarray) -> np.ndarray:
    """Sign bits (value > 0, as sqlite-vec's vec_quantize_binary) packed into uint64 words per row."""
    packed = np.packbits(vectors > 0, axis=1)
    pad = -packed.shape[1] % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


_indexes: dict[str, BitIndex] = {}
_indexes_lock = threading.Lock()


def index_for(conn: Connection, table: str) -> BitIndex:
    """The process's index of ``table`` in the database of ``conn``, brought up to date."""
    key = get_meta(conn, f"index_id:{table}") or ""
    with _indexes_lock:
        index = _indexes.get(key)
        if index is None:
            while len(_indexes) >= _MAX_INDEXES:
                _indexes.pop(next(iter(_indexes)))
            index = _indexes[key] = BitIndex(table)
    index.refresh(conn)
    return index


def nearest(conn: Connection, table: str, query: np.ndarray, k: int) -> dict[int, float]:
    """Row id -> exact cosine of the ``k`` nearest rows of ``table`` (float16 vectors read back by id)."""
    if k <= 0:
        return {}
    index = index_for(conn, table)
    ids = index.candidates(query, k).tolist()
    if not ids:
        return {}
    cosines = half_cosines(conn, table, query, ids)
    index.note_missing(len(ids) - len(cosines), len(ids))
    return dict(sorted(cosines.items(), key=lambda item: -item[1])[:k])


def half_cosines(conn: Connection, table: str, query: np.ndarray, ids: list[int]) -> dict[int, float]:
    """Cosine of ``query`` with the float16 vectors of ``ids`` in ``table`` (rows not there are left out)."""
    rows = conn.execute(
        f"select id, vector from {table} where id in (select value from json_each(?))", (json.dumps(ids),)
    ).fetchall()
    if not rows:
        return {}
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16).reshape(len(rows), -1)
    cosines = matrix.astype(np.float32) @ np.asarray(query, dtype=np.float32)
    return {int(row[0]): float(cosine) for row, cosine in zip(rows, cosines, strict=True)}
