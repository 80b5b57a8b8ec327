"""Vector tables: one per searchable record kind, sized to the configured embedding model, and the meta
entries that say which model filled them. Not part of the migrations: their dimension depends on the model."""

from __future__ import annotations

import uuid

import numpy as np
import structlog

from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)

# vec0 tables: one per searchable record kind with few scopes. The partition key keeps scope filters inside
# the KNN query (docs/memory.md), so a label's search never competes with other labels for the top-k slots.
VECTOR_TABLES: dict[str, str] = {
    "knowledge_vec": "id integer primary key, label text partition key, embedding float[{dims}]",
    "tool_index_vec": "id integer primary key, embedding float[{dims}]",
    "facts_vec": "id integer primary key, scope text partition key, embedding float[{dims}]",
}
# The feed's vectors: a plain table of float16 vectors with each message's chat (``memory.search.bit_index``
# holds their sign bits and an int8 copy in memory and reads candidates back from here; a point read of a vec0
# table costs ~80 us, of this table a few). ``seq`` numbers every write, so the in-memory index loads only what
# is new; ``meta.index_id:<table>`` changes whenever the table is recreated. 768 bytes a vector at 384 dims.
HALF_VECTOR_TABLE = "tg_messages_vec16"
HALF_VECTOR_COLUMNS = (
    "seq integer primary key autoincrement, id integer not null unique, vector blob not null, scope integer, "
    "code blob"  # the in-memory index's code of the vector (memory.search.vector_codes), so a start reads no vector
)
# Tables of older layouts. The vec0 bit table, whose `+vector` column held the same float16 copies (copied
# over once). The feed's vec0 table, one partition per chat: each partition allocates chunks of 1,024 float32
# vectors, so a chat of 3 messages cost 1.5 MB and 100k messages in 500 chats 852 MB (for 154 MB of vectors).
_OLD_BIT_TABLE = "tg_messages_vec_bits"
_OLD_FEED_TABLE = "tg_messages_vec"
# A table whose layout (or partition values) changed is rebuilt from its rows once: dropped, recreated and
# its rows marked for re-embedding. Version 2: knowledge is partitioned by privacy label, and fact scopes
# became labels (schema step 2).
VECTOR_LAYOUT = {"knowledge_vec": 2, "facts_vec": 2}
# The table whose rows each vector table indexes; their `embedded` flags are reset on a re-embed.
VECTOR_SOURCES = {
    "knowledge_vec": "knowledge",
    "tg_messages_vec": "tg_messages",
    "tool_index_vec": "tool_index",
    "facts_vec": "facts",
}


def get_meta(conn: Connection, key: str) -> str | None:
    row = conn.execute("select value from meta where key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: Connection, key: str, value: str) -> None:
    conn.execute(
        "insert into meta(key, value) values (?, ?) on conflict(key) do update set value = excluded.value",
        (key, value),
    )


def ensure_vector_tables(conn: Connection, model: str, dims: int) -> bool:
    """Create the vec0 tables for ``model``; return True when an existing index was dropped.

    Vectors of two models never share a table: when the model or dimension differs from what the index
    was built with, every vector table is dropped and recreated empty and each row is marked for
    re-embedding, which the embedding workers then pick up. A table of an older layout
    (``VECTOR_LAYOUT``) is rebuilt the same way, alone.
    """
    stored = get_meta(conn, "embedding_model"), get_meta(conn, "embedding_dims")
    wanted = model, str(dims)
    reset = stored != (None, None) and stored != wanted
    conn.execute("begin immediate")
    try:
        for table, columns in VECTOR_TABLES.items():
            layout = VECTOR_LAYOUT.get(table, 1)
            exists = conn.execute("select 1 from sqlite_master where name = ?", (table,)).fetchone() is not None
            outdated = exists and int(get_meta(conn, f"vector_layout:{table}") or 1) < layout
            if reset or outdated:
                conn.execute(f"drop table if exists {table}")
                conn.execute(f"update {VECTOR_SOURCES[table]} set embedded = 0")
            conn.execute(f"create virtual table if not exists {table} using vec0({columns.format(dims=dims)})")
            set_meta(conn, f"vector_layout:{table}", str(layout))
        _ensure_half_table(conn, reset)
        _drop_old_feed_table(conn, reset)
        set_meta(conn, "embedding_model", model)
        set_meta(conn, "embedding_dims", str(dims))
        conn.execute("commit")
    except BaseException:
        conn.execute("rollback")
        raise
    return reset


def _exists(conn: Connection, table: str) -> bool:
    return conn.execute("select 1 from sqlite_master where name = ?", (table,)).fetchone() is not None


def _ensure_half_table(conn: Connection, reset: bool) -> None:
    table = HALF_VECTOR_TABLE
    if not reset and _exists(conn, table):
        columns = {row[1] for row in conn.execute(f"pragma table_info({table})")}
        if "scope" not in columns:  # before searches within a chat used it: each row's chat, from its message
            conn.execute(f"alter table {table} add column scope integer")
            conn.execute(f"update {table} set scope = (select chat_id from tg_messages m where m.id = {table}.id)")
        if "code" not in columns:  # filled by the embedding worker (memory.search.vector_store.fill_codes)
            conn.execute(f"alter table {table} add column code blob")
        return
    conn.execute(f"drop table if exists {table}")
    conn.execute(f"create table {table} ({HALF_VECTOR_COLUMNS})")
    set_meta(conn, f"index_id:{table}", uuid.uuid4().hex)
    if reset:
        conn.execute("update tg_messages set embedded = 0")
    else:
        if _exists(conn, _OLD_BIT_TABLE):
            conn.execute(
                f"insert into {table}(id, vector, scope) select b.id, b.vector, m.chat_id "
                f"from {_OLD_BIT_TABLE} b left join tg_messages m on m.id = b.id order by b.id"
            )
        else:  # vectors from before any float16 copy: the messages are embedded again to fill it
            conn.execute("update tg_messages set embedded = 0")
    conn.execute(f"drop table if exists {_OLD_BIT_TABLE}")


def _drop_old_feed_table(conn: Connection, reset: bool) -> None:
    """Drop the feed's per-chat vec0 table: its vectors are in the float16 table already (both were written in
    one transaction). A message embedded but missing there gets its vector converted, not embedded again."""
    if not _exists(conn, _OLD_FEED_TABLE):
        return
    missing = []
    if not reset:
        missing = conn.execute(
            f"select m.id from tg_messages m where m.embedded = 1 "
            f"and not exists (select 1 from {HALF_VECTOR_TABLE} h where h.id = m.id)"
        ).fetchall()
        for (row_id,) in missing:  # `id = ?`: vec0's rowid lookup, not a scan
            found = conn.execute(f"select embedding from {_OLD_FEED_TABLE} where id = ?", (row_id,)).fetchone()
            if found is None:
                conn.execute("update tg_messages set embedded = 0 where id = ?", (row_id,))
                continue
            half = np.frombuffer(found[0], dtype=np.float32).astype(np.float16).tobytes()
            conn.execute(
                f"insert into {HALF_VECTOR_TABLE}(id, vector, scope) "
                "select ?, ?, chat_id from tg_messages where id = ?",
                (row_id, half, row_id),
            )
    pages = int(conn.execute("pragma page_count").fetchone()[0])
    conn.execute(f"drop table {_OLD_FEED_TABLE}")
    freed = int(conn.execute("pragma freelist_count").fetchone()[0])
    page = int(conn.execute("pragma page_size").fetchone()[0])
    # The file keeps its size: the free pages are reused as the archive grows, or given back by a vacuum.
    log.info("feed_vectors_migrated", converted=len(missing), free_mb=freed * page // 2**20, pages=pages)
