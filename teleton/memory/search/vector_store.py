"""Writing and removing rows of the sqlite-vec tables (sync; call inside ``db.write``).

vec0 tables have no upsert, so a write is delete-then-insert (the feed's float16 table likewise: a new ``seq``
tells the in-memory index to load the row again). Table names come from the corpus constants
in ``search.hybrid``; vectors are bound as float32 blobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from teleton.memory.search import vector_codes
from teleton.memory.search.corpora import Corpus
from teleton.storage.sqlite_driver import Connection
from teleton.storage.vector_tables import get_meta


class ModelMismatchError(RuntimeError):
    """The provider's model is not the one the vector tables were built for (vectors are never mixed)."""


def check_model(conn: Connection, model_id: str, dims: int) -> None:
    stored = get_meta(conn, "embedding_model"), get_meta(conn, "embedding_dims")
    if stored != (model_id, str(dims)):
        raise ModelMismatchError(
            f"vector index was built for {stored[0]} ({stored[1]} dims), provider is {model_id} ({dims} dims); "
            "open the database with the provider's model so the index is rebuilt"
        )


def write_vectors(conn: Connection, corpus: Corpus, rows: Iterable[tuple[int, Any, np.ndarray]]) -> None:
    """Store (id, scope value, vector) triples; the scope value is ignored for corpora without one."""
    assert corpus.vec is not None
    for row_id, scope_value, vector in rows:
        delete_vectors(conn, corpus, [row_id])
        if corpus.half:
            half = np.asarray(vector, dtype=np.float16).tobytes()
            code = vector_codes.encode_stored([half])[0].tobytes()
            sql = f"insert into {corpus.vec}(id, vector, scope, code) values (?, ?, ?, ?)"
            conn.execute(sql, (row_id, half, scope_value, code))
            continue
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        if corpus.scope_column is None:
            conn.execute(f"insert into {corpus.vec}(id, embedding) values (?, ?)", (row_id, blob))
        else:
            conn.execute(
                f"insert into {corpus.vec}(id, {corpus.scope_column}, embedding) values (?, ?, ?)",
                (row_id, scope_value, blob),
            )


def fill_codes(conn: Connection, corpus: Corpus, limit: int) -> int:
    """Code up to ``limit`` stored vectors that have none (written before codes were stored); how many."""
    assert corpus.half and corpus.vec is not None
    rows = conn.execute(f"select seq, vector from {corpus.vec} where code is null limit ?", (limit,)).fetchall()
    if rows:
        codes = vector_codes.encode_stored([r[1] for r in rows])
        updates = [(code.tobytes(), row[0]) for code, row in zip(codes, rows, strict=True)]
        conn.executemany(f"update {corpus.vec} set code = ? where seq = ?", updates)
    return len(rows)


def delete_vectors(conn: Connection, corpus: Corpus, ids: Sequence[int]) -> None:
    assert corpus.vec is not None
    for row_id in ids:
        conn.execute(f"delete from {corpus.vec} where id = ?", (row_id,))
