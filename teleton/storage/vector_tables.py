"""Vector tables: one per searchable record kind, sized to the configured embedding model, and the meta
entries that say which model filled them. Not part of the migrations: their dimension depends on the model."""

from __future__ import annotations

import uuid

from teleton.storage.sqlite_driver import Connection

# Vector tables: one per searchable record kind. The partition key keeps scope filters inside the KNN
# query (DESIGN §5), so a group's search never competes with other chats for the top-k slots.
VECTOR_TABLES: dict[str, str] = {
    "knowledge_vec": "id integer primary key, label text partition key, embedding float[{dims}]",
    "tg_messages_vec": "id integer primary key, chat_id integer partition key, embedding float[{dims}]",
    "tool_index_vec": "id integer primary key, embedding float[{dims}]",
    "facts_vec": "id integer primary key, scope text partition key, embedding float[{dims}]",
}
# A plain table of float16 copies, for searches across all chats (``memory.bit_index``): their sign bits
# are held in memory and the candidates re-ranked with them (a point read of a partitioned vec0 table costs
# ~80 us, of this table a few). ``seq`` numbers every write, so the in-memory index loads only what is new;
# ``meta.index_id:<table>`` changes whenever the table is recreated.
HALF_VECTOR_TABLE = "tg_messages_vec16"
HALF_VECTOR_COLUMNS = "seq integer primary key autoincrement, id integer not null unique, vector blob not null"
# The vec0 bit table it replaced, whose `+vector` column held the same float16 copies (copied over once).
_OLD_BIT_TABLE = "tg_messages_vec_bits"
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
        set_meta(conn, "embedding_model", model)
        set_meta(conn, "embedding_dims", str(dims))
        conn.execute("commit")
    except BaseException:
        conn.execute("rollback")
        raise
    return reset


def _ensure_half_table(conn: Connection, reset: bool) -> None:
    table = HALF_VECTOR_TABLE
    if not reset and conn.execute("select 1 from sqlite_master where name = ?", (table,)).fetchone() is not None:
        return
    conn.execute(f"drop table if exists {table}")
    conn.execute(f"create table {table} ({HALF_VECTOR_COLUMNS})")
    set_meta(conn, f"index_id:{table}", uuid.uuid4().hex)
    if not reset:
        if conn.execute("select 1 from sqlite_master where name = ?", (_OLD_BIT_TABLE,)).fetchone() is not None:
            conn.execute(f"insert into {table}(id, vector) select id, vector from {_OLD_BIT_TABLE} order by id")
        else:  # vectors from before any float16 copy: the messages are embedded again to fill it
            conn.execute("update tg_messages set embedded = 0")
    conn.execute(f"drop table if exists {_OLD_BIT_TABLE}")
