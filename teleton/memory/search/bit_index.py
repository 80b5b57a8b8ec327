"""An in-memory index of a float16 vector table, for nearest-neighbour search in any set of chats.

The index holds each vector's sign code (``vector_codes``) and chat: codes are scanned by Hamming distance,
the ``OVERSAMPLE`` x k nearest re-ranked by the query's values against their signs, the best ``READ_BACK`` x k
read back as float16 and the exact top k returned. Below ``EXACT_ROWS`` rows it also holds the float32 vectors
and searches exactly. It follows the table by its write ``seq``. Why, and the figures: docs/memory.md, "The
feed's vectors" and "The feed's vector index".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import structlog

from teleton.memory.search import vector_codes
from teleton.memory.search.corpora import Corpus
from teleton.storage.sqlite_driver import Connection
from teleton.storage.vector_tables import get_meta

# Codes re-ranked per wanted result, and rows read back exactly per wanted result. The exact top 30 found with
# x80 and sign codes (2026-11-27): at 1M on bench_scale's archive x20 0.951, x30 0.963, x40 0.966; on the test's
# harder 100k x20 0.940, x30 0.957, x40 0.962. Two bits per dimension had 0.965 and 0.964 with x20 for 56 MB
# more at 1M; a reading back of 900 rows costs ~1.5 ms more than of 600.
OVERSAMPLE = 80
READ_BACK = 30
# A rebuild drops stale rows once this share of a search's final reads no longer found a vector.
STALE_SHARE = 0.1
# Rows up to which the index also holds the vectors as float32 (1.5 kB a row at 384 dims: 30 MB at 20k), searched
# exactly; past it the copy is dropped, so a large archive costs what the codes cost.
EXACT_ROWS = 20_000
LOAD_BATCH = 16_000  # rows read per query while loading (1.8 s at 1M with 4,000, 1.3 s with this)
_NO_SCOPE = int(np.iinfo(np.int64).min)  # a row without a chat: found by unscoped searches only
_NO_ID = int(np.iinfo(np.int64).min)
_NARROW_ID = int(np.iinfo(np.int32).max)  # ids up to this are held as int32: half the memory
FEW_LOOKUPS = 32  # ids of a refresh looked up one by one rather than through a sort (see _positions)
_MAX_INDEXES = 8  # one per open database and table; a process opening many (tests) drops the oldest

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class _Arrays:
    """One consistent view for readers: only the first ``size`` rows are filled."""

    signs: np.ndarray  # (words, capacity) uint64: word-major, so the Hamming scan runs over contiguous memory
    ids: np.ndarray  # (capacity,) int32 while every id fits, else int64
    scopes: np.ndarray  # (capacity,) int32: each row's scope (its chat) as numbered by ``BitIndex._scope_numbers``
    size: int
    floats: np.ndarray | None = None  # (capacity, dims) float32: the vectors themselves, in a small index


def _arrays(words: int, capacity: int, id_type: type = np.int32, dims: int = 0) -> _Arrays:
    floats = np.zeros((capacity, dims), np.float32) if dims else None
    signs = np.zeros((words, capacity), np.uint64)
    return _Arrays(signs, np.zeros(capacity, id_type), np.zeros(capacity, np.int32), 0, floats)


_EMPTY = _arrays(0, 0)


@dataclass(frozen=True)
class _Batch:
    ids: np.ndarray
    scopes: np.ndarray
    codes: np.ndarray
    floats: np.ndarray | None  # while the index holds the vectors
    last_seq: int


class BitIndex:
    """Compact copies of one table's vectors; safe for concurrent readers (one refresh at a time)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._lock = threading.Lock()
        self._arrays = _EMPTY
        self._seen_seq = 0
        self._max_id = _NO_ID  # the largest id held: a row numbered above it is new
        self._stale = False
        self._scopes: dict[int, int] = {}  # scope value (a chat id, 64 bits) -> its number in ``scopes``
        self._code_bytes = 0  # of a code's sign words, from the table's vector size
        self._dims = 0  # the vectors' width, read with the code's
        self._floats = False  # the vectors are held as float32 too (``EXACT_ROWS``)

    def __len__(self) -> int:
        return self._arrays.size

    def refresh(self, conn: Connection) -> None:
        """Load the rows written since the last refresh (all of them after a rebuild)."""
        # A reader whose snapshot is older than the index's may see a smaller seq: that is not a reset (a
        # recreated table has a new index_id, hence a new index), so only a larger one means new rows.
        found = conn.execute(f"select seq from {self.table} order by seq desc limit 1").fetchone()
        last = int(found[0]) if found else 0
        if last <= self._seen_seq and not self._stale:
            return
        with self._lock:
            if self._stale:
                self._arrays, self._seen_seq, self._max_id, self._stale = _EMPTY, 0, _NO_ID, False
            first = self._seen_seq == 0
            # Sized once for the whole first load: growing step by step leaves every old copy in the heap.
            expect = 0 if self._seen_seq else int(conn.execute(f"select count(*) from {self.table}").fetchone()[0])
            if first:
                self._floats = expect <= EXACT_ROWS
            # A first load stops at the rows there when it began: ids are unique among them, so it need not look
            # each one up (a row re-written meanwhile comes with the next refresh, found and overwritten).
            until = last if first else 2**63 - 1
            while (batch := self._read_batch(conn, until)) is not None:
                self._add(batch, expect, fresh=first)
                self._seen_seq = batch.last_seq
            if first:
                log.info("vector_index_loaded", table=self.table, rows=self._arrays.size)

    def _read_batch(self, conn: Connection, until: int) -> _Batch | None:
        """Ids, scopes and codes (and vectors, while the index holds them) of the next ``LOAD_BATCH`` rows after
        ``_seen_seq`` (up to ``until``), and the last one's seq; None when there are none.

        Each column comes concatenated in one value: a row per row cost 3.7 s of Python objects at 1M rows,
        this 1.2 s. Of a code only its sign words are read (one stored before 2026-11-27 is longer). A batch
        holding rows written before codes were stored is read row by row, their codes computed
        (``group_concat`` skips a NULL, which would shift the codes against their ids).
        """
        if not self._code_bytes:
            found = conn.execute(f"select length(vector) from {self.table} limit 1").fetchone()
            if found is None:  # every row erased since ``refresh`` looked: nothing to load
                return None
            self._dims = int(found[0]) // 2  # float16: 2 bytes a dimension
            self._code_bytes = vector_codes.sign_bytes(self._dims)
        window = f"from {self.table} where seq > ? and seq <= ? order by seq limit ?"
        args = (self._seen_seq, until, LOAD_BATCH)
        width = self._code_bytes
        vectors = "cast(group_concat(vector, '') as blob)" if self._floats else "null"
        last, count, uncoded, ids, scopes, codes, halves = conn.execute(
            f"select max(seq), count(*), count(*) - count(code), group_concat(id), "
            f"group_concat(ifnull(scope, {_NO_SCOPE})), cast(group_concat(substr(code, 1, {width}), '') as blob), "
            f"{vectors} from (select seq, id, scope, code, vector {window})",
            args,
        ).fetchone()
        if not count:
            return None
        if uncoded:
            # A vector is read for a row without a code, or for every row while the index holds them.
            vector = "vector" if self._floats else "iif(code is null, vector, null)"
            sql = f"select id, ifnull(scope, {_NO_SCOPE}), substr(code, 1, {width}), {vector} "
            rows = conn.execute(sql + window, args).fetchall()
            ids, scopes = np.array([r[:2] for r in rows], np.int64).T
            floats = self._as_floats(b"".join(r[3] for r in rows)) if self._floats else None
            return _Batch(ids, scopes, _codes(rows), floats, int(last))
        return _Batch(
            np.fromstring(ids, np.int64, sep=","),
            np.fromstring(scopes, np.int64, sep=","),
            np.frombuffer(codes, np.uint8).reshape(count, -1),
            None if halves is None else self._as_floats(halves),
            int(last),
        )

    def _as_floats(self, halves: bytes) -> np.ndarray:
        return np.frombuffer(halves, np.float16).reshape(-1, self._dims).astype(np.float32)

    def _rows(self, a: _Arrays, scope: Sequence[int] | None) -> np.ndarray | slice:
        """The index's rows within ``scope`` (scope values; every row when None)."""
        if scope is None:
            return slice(0, a.size)
        numbers = [self._scopes[value] for value in scope if value in self._scopes]
        return np.flatnonzero(np.isin(a.scopes[: a.size], np.asarray(numbers, np.int32)))

    def exact(
        self, query: np.ndarray, n: int, scope: Sequence[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Ids and cosines of the ``n`` best rows for ``query`` within ``scope``, best first, from the float copy;
        None when the index holds none (past ``EXACT_ROWS``)."""
        a = self._arrays
        if a.floats is None:
            return None
        rows = self._rows(a, scope)
        scores = np.vecdot(a.floats[rows], np.asarray(query, np.float32))  # no BLAS: see half_cosines
        best = np.argpartition(-scores, n)[:n] if n < len(scores) else np.arange(len(scores))
        best = best[np.argsort(-scores[best], kind="stable")]
        return a.ids[rows][best], scores[best]

    def candidates(self, query: np.ndarray, k: int, scope: Sequence[int] | None = None) -> np.ndarray:
        """Ids of the ``READ_BACK`` x k best rows for ``query`` (within ``scope``, scope values, when given): the
        nearest codes, re-ranked by the query's values against their signs."""
        a = self._arrays
        rows = self._rows(a, scope)
        count = a.size if isinstance(rows, slice) else len(rows)
        if scope is not None and count <= READ_BACK * k:  # a small scope is read back whole: exact
            return a.ids[rows]
        if count == 0:
            return a.ids[:0]
        code = vector_codes.pack_bits(query[None, :])[0]
        xor = np.empty(count, np.uint64)  # one buffer for every word: no temporaries the size of the index
        distance = np.bitwise_count(np.bitwise_xor(a.signs[0, rows], code[0], out=xor)).astype(np.uint16)
        for word in range(1, a.signs.shape[0]):
            distance += np.bitwise_count(np.bitwise_xor(a.signs[word, rows], code[word], out=xor))
        near = _smallest(distance, k * OVERSAMPLE) if k * OVERSAMPLE < count else np.arange(count)
        if isinstance(rows, np.ndarray):
            near = rows[near]  # positions among the scope's rows -> in the index
        score = vector_codes.sign_scores(a.signs[:, near].T, query)
        best = near[np.argsort(-score)[: READ_BACK * k]]
        return a.ids[best]

    def note_missing(self, missing: int, asked: int) -> None:
        if asked and missing / asked > STALE_SHARE:
            self._stale = True

    def invalidate(self) -> None:
        """Rebuild at the next refresh: rows erased on purpose (``memory.forget``) leave no copy in memory."""
        self._stale = True

    def _add(self, batch: _Batch, expect: int = 0, fresh: bool = False) -> None:
        """Store rows; ``fresh``: rows of a first load, all new (see ``refresh``)."""
        a, ids = self._arrays, batch.ids
        at = np.full(len(ids), -1, np.int64)
        if not fresh:
            # Rows are mostly new messages, numbered above every row held: only a row at or below the largest
            # id (a message embedded again, after an edit) is looked up among those held.
            again = np.flatnonzero(ids <= self._max_id)
            if len(again):
                at[again] = _positions(a.ids[: a.size], ids[again])
        if len(ids):
            self._max_id = max(self._max_id, int(ids.max()))
        new = int((at < 0).sum())
        at[at < 0] = np.arange(a.size, a.size + new)
        signs = np.ascontiguousarray(batch.codes).view(np.uint64)
        wide = self._max_id > _NARROW_ID and a.ids.dtype != np.int64
        self._floats = self._floats and a.size + new <= EXACT_ROWS  # past it, the copy goes for good
        if a.size + new > len(a.ids) or wide or (a.floats is not None and not self._floats):
            # A quarter spare, not double: each copy stays in the heap a while.
            capacity = max(1024, expect + expect // 8, (a.size + new) * 5 // 4)
            id_type = np.int64 if self._max_id > _NARROW_ID else np.int32
            grown = _arrays(signs.shape[1], capacity, id_type, self._dims if self._floats else 0)
            if a.size:  # the first load has nothing to copy (and no width yet)
                grown.signs[:, : a.size] = a.signs[:, : a.size]
                grown.ids[: a.size], grown.scopes[: a.size] = a.ids[: a.size], a.scopes[: a.size]
                if grown.floats is not None and a.floats is not None:
                    grown.floats[: a.size] = a.floats[: a.size]
            a = replace(grown, size=a.size)
        a.ids[at], a.scopes[at], a.signs[:, at] = ids, self._scope_numbers(batch.scopes), signs.T
        if a.floats is not None and batch.floats is not None:
            a.floats[at] = batch.floats
        # Readers take the arrays whole: a search never sees a count past the rows filled.
        self._arrays = replace(a, size=a.size + new)

    def _scope_numbers(self, values: np.ndarray) -> np.ndarray:
        """Scope values (chat ids, 64 bits) as the small numbers ``scopes`` holds; -1 for a row without one."""
        distinct, where = np.unique(values, return_inverse=True)
        numbers = [-1 if v == _NO_SCOPE else self._scopes.setdefault(v, len(self._scopes)) for v in distinct.tolist()]
        return np.asarray(numbers, np.int32)[where]


def _codes(rows: list[tuple]) -> np.ndarray:
    """The rows' codes (column 2); a row written before codes were stored has its vector (column 3) coded here."""
    uncoded = [r[3] for r in rows if r[2] is None]
    computed = iter(vector_codes.encode_stored(uncoded) if uncoded else ())
    blobs = [r[2] if r[2] is not None else next(computed).tobytes() for r in rows]
    return np.frombuffer(b"".join(blobs), np.uint8).reshape(len(rows), -1)


def _positions(known: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where each of ``ids`` is in ``known`` (a re-embedded row), -1 for one not there. A few are compared with
    every row (0.7 ms each at 1M rows), more through a sort of all rows (120 ms at 1M, which every embedding
    round once paid); an id -> position dict would cost ~10 MB per 100k rows."""
    at = np.full(len(ids), -1, np.int64)
    if len(known) == 0:
        return at
    if len(ids) <= FEW_LOOKUPS:
        for n, row_id in enumerate(ids.tolist()):
            hit = np.flatnonzero(known == row_id)
            at[n] = hit[0] if len(hit) else -1
        return at
    order = np.argsort(known, kind="stable")
    slot = np.minimum(np.searchsorted(known[order], ids), len(known) - 1)
    found = known[order][slot] == ids
    at[found] = order[slot[found]]
    return at


def _smallest(distance: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` smallest distances (ties by position), in order. Distances are small integers, so
    their histogram gives the cut-off, and one pass over them the rows within it: a third faster than
    ``argpartition`` over 1M rows."""
    counts = np.cumsum(np.bincount(distance))
    cut = int(np.searchsorted(counts, n))  # the rows at distances up to ``cut`` are at least n
    within = np.flatnonzero(distance <= cut)
    if len(within) > n:  # the first rows at the cut-off complete the n
        keep = distance[within] < cut
        keep[np.flatnonzero(~keep)[: n - int(keep.sum())]] = True
        within = within[keep]
    return within


_indexes: dict[str, BitIndex] = {}
_indexes_lock = threading.Lock()


def index_for(conn: Connection, corpus: Corpus) -> BitIndex:
    """The process's index of the corpus's vectors in the database of ``conn``, brought up to date."""
    assert corpus.vec is not None
    key = get_meta(conn, f"index_id:{corpus.vec}") or ""
    with _indexes_lock:
        index = _indexes.get(key)
        if index is None:
            while len(_indexes) >= _MAX_INDEXES:
                _indexes.pop(next(iter(_indexes)))
            index = _indexes[key] = BitIndex(corpus.vec)
    index.refresh(conn)
    return index


def nearest(
    conn: Connection, corpus: Corpus, query: np.ndarray, k: int, scope: Sequence[int] | None = None
) -> dict[int, float]:
    """Row id -> exact cosine of the ``k`` nearest rows of the corpus within ``scope`` (all rows when None):
    from the float copy of a small index, else their float16 vectors read back by id."""
    if k <= 0:
        return {}
    index = index_for(conn, corpus)
    found = index.exact(query, 2 * k, scope)  # twice k: a row erased since it was loaded leaves its place
    if found is not None:
        ids, cosines = found[0].tolist(), found[1].tolist()
        held = stored(conn, index.table, ids)
        index.note_missing(len(ids) - len(held), len(ids))
        return dict([(i, c) for i, c in zip(ids, cosines, strict=True) if i in held][:k])
    ids = index.candidates(query, k, scope).tolist()
    if not ids:
        return {}
    cosines = half_cosines(conn, index.table, query, ids)
    index.note_missing(len(ids) - len(cosines), len(ids))
    return dict(sorted(cosines.items(), key=lambda item: -item[1])[:k])


def stored(conn: Connection, table: str, ids: list[int]) -> set[int]:
    """Those of ``ids`` with a vector in ``table`` (an edited message's is erased until it is embedded again)."""
    sql = f"select id from {table} where id in (select value from json_each(?))"
    return {int(row[0]) for row in conn.execute(sql, (json.dumps(ids),))}


def half_cosines(conn: Connection, table: str, query: np.ndarray, ids: list[int]) -> dict[int, float]:
    """Cosine of ``query`` with the float16 vectors of ``ids`` in ``table`` (rows not there are left out).

    The ids are looked up in order (neighbouring pages) and the vectors come back as one value: 900 rows
    as tuples cost more in Python than in SQLite. The products run without BLAS (``np.vecdot``, as fast as
    one BLAS thread): numpy's default BLAS threads busy-wait after each call, taking a second core."""
    found, vectors = conn.execute(
        f"select group_concat(id), cast(group_concat(vector, '') as blob) "
        f"from (select id, vector from {table} where id in (select value from json_each(?)))",
        (json.dumps(sorted(ids)),),
    ).fetchone()
    if not found:
        return {}
    row_ids = np.fromstring(found, np.int64, sep=",")
    matrix = np.frombuffer(vectors, np.float16).reshape(len(row_ids), -1).astype(np.float32)
    cosines = np.vecdot(matrix, np.asarray(query, np.float32))
    return dict(zip(row_ids.tolist(), cosines.tolist(), strict=True))
