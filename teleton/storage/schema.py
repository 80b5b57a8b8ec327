"""The database schema and its forward-only migrations.

Each migration is a function that takes a connection inside a transaction. ``meta.schema_version``
records the last one applied; opening a database applies the missing ones in order, so a database made by
any earlier release is upgraded at start. Vector tables are not part of the migrations: their dimension
depends on the configured embedding model (see ``vector_tables``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from teleton.storage.feed_context import feed_triggers, migrate_feed_context
from teleton.storage.migration_cache_writes import migrate_cache_writes
from teleton.storage.migration_fact_history import migrate_fact_history
from teleton.storage.migration_fact_sources import migrate_fact_sources
from teleton.storage.migration_held import migrate_held
from teleton.storage.migration_labels import migrate_labels
from teleton.storage.migration_mcp_pins import migrate_mcp_pins
from teleton.storage.migration_mcp_review import migrate_mcp_review
from teleton.storage.migration_reactions import migrate_reactions
from teleton.storage.migration_replies import migrate_replies
from teleton.storage.migration_streams import migrate_streams
from teleton.storage.migration_topics import migrate_topics
from teleton.storage.reply_parts import migrate_reply_parts
from teleton.storage.sqlite_driver import Connection
from teleton.storage.usage import migrate_usage

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
# sessions.messages_json holds Messages API messages; a person's message also names its archive row under this
# key, [chat id, message id, date] (Teleton's own: ``llm.types.sendable`` strips it from every request). What a
# transcript's fact was drawn from (``agent.distiller``), and what /forget of that message scrubs by id.
SESSION_ARCHIVED = "_archived"

_V1 = f"""
create table if not exists meta (
    key   text primary key,
    value text not null
);

create table if not exists knowledge (
    id         integer primary key,
    source     text not null check (source in ('memory', 'session', 'learned')),
    path       text not null default '',
    heading    text not null default '',
    text       text not null,
    hash       text not null,
    start_line integer not null default 0,
    embedded   integer not null default 0,
    created_at real not null,
    updated_at real not null
);
create index if not exists knowledge_path on knowledge(path);
create index if not exists knowledge_hash on knowledge(hash);
create virtual table if not exists knowledge_fts using fts5(
    heading, text, content='knowledge', content_rowid='id', tokenize='{FTS_TOKENIZER}'
);
create trigger if not exists knowledge_ai after insert on knowledge begin
    insert into knowledge_fts(rowid, heading, text) values (new.id, new.heading, new.text);
end;
create trigger if not exists knowledge_ad after delete on knowledge begin
    insert into knowledge_fts(knowledge_fts, rowid, heading, text)
        values ('delete', old.id, old.heading, old.text);
end;
create trigger if not exists knowledge_au after update of heading, text on knowledge begin
    insert into knowledge_fts(knowledge_fts, rowid, heading, text)
        values ('delete', old.id, old.heading, old.text);
    insert into knowledge_fts(rowid, heading, text) values (new.id, new.heading, new.text);
end;

create table if not exists sessions (
    id                text primary key,
    chat_id           integer not null,
    active            integer not null default 1,
    messages_json     text not null default '[]',
    summary           text not null default '',
    input_tokens      integer not null default 0,
    output_tokens     integer not null default 0,
    cache_read_tokens integer not null default 0,
    last_input_tokens integer not null default 0,
    created_at        real not null,
    updated_at        real not null,
    ended_at          real,
    end_reason        text
);
create index if not exists sessions_chat on sessions(chat_id, active);

create table if not exists tg_chats (
    id           integer primary key,
    type         text not null check (type in ('dm', 'group', 'channel')),
    title        text not null default '',
    username     text,
    member_count integer,
    updated_at   real not null
);

create table if not exists tg_users (
    id         integer primary key,
    first_name text not null default '',
    last_name  text not null default '',
    username   text,
    phone      text,
    is_bot     integer not null default 0,
    updated_at real not null
);
create index if not exists tg_users_username on tg_users(username);

create table if not exists tg_messages (
    id          integer primary key,
    chat_id     integer not null,
    message_id  integer not null,
    sender_id   integer,
    sender_name text not null default '',
    date        real not null,
    text        text not null default '',
    is_outgoing integer not null default 0,
    media_kind  text,
    reply_to_id integer,
    fwd_from    text,
    is_service  integer not null default 0,
    edited      integer not null default 0,
    edit_date   real,
    deleted     integer not null default 0,
    embedded    integer not null default 0,
    agent_state text,
    unique (chat_id, message_id)
);
create index if not exists tg_messages_chat_date on tg_messages(chat_id, date);
create index if not exists tg_messages_unembedded on tg_messages(embedded) where embedded = 0;
-- The feed's keyword index carries each message's conversational context: the text of up to two earlier
-- messages of the same chat (within six hours). Questions are often answered by a reply whose own words
-- do not repeat the question ("What did Anna paint?" -> "a sunset over the lake"), and the preceding
-- message supplies them. It is a regular FTS5 table (it keeps its own copy of the text) so that a row can
-- be deleted by rowid alone even after its neighbours changed; the embedding worker refreshes the context
-- when it embeds the row (see teleton.memory.feed.embedding, which owns the same rule in Python). The
-- triggers live in teleton.storage.feed_context, with the rule's numbers.
-- The `chat` column holds one token naming the chat (see FEED_CHAT_TOKEN_SQL), so a chat-scoped keyword
-- search is a doclist intersection inside FTS5 instead of a join over every match in every chat.
create virtual table if not exists tg_messages_fts using fts5(
    sender_name, text, context, chat, tokenize='{FTS_TOKENIZER}'
);
{feed_triggers(None)}
create trigger if not exists tg_messages_ad after delete on tg_messages begin
    delete from tg_messages_fts where rowid = old.id;
end;

create table if not exists embedding_cache (
    model       text not null,
    hash        text not null,
    dims        integer not null,
    embedding   blob not null,
    created_at  real not null,
    last_access real not null,
    primary key (model, hash)
) without rowid;
create index if not exists embedding_cache_lru on embedding_cache(last_access);

create table if not exists exec_audit (
    id          integer primary key,
    tool        text not null,
    command     text not null,
    exit_code   integer,
    stdout      text not null default '',
    stderr      text not null default '',
    duration_ms integer not null,
    chat_id     integer,
    created_at  real not null
);

create table if not exists tool_index (
    id          integer primary key,
    name        text not null unique,
    description text not null,
    search_text text not null,
    hash        text not null,
    embedded    integer not null default 0,
    updated_at  real not null
);
create virtual table if not exists tool_index_fts using fts5(
    name, search_text, content='tool_index', content_rowid='id', tokenize='{FTS_TOKENIZER}'
);
create trigger if not exists tool_index_ai after insert on tool_index begin
    insert into tool_index_fts(rowid, name, search_text) values (new.id, new.name, new.search_text);
end;
create trigger if not exists tool_index_ad after delete on tool_index begin
    insert into tool_index_fts(tool_index_fts, rowid, name, search_text)
        values ('delete', old.id, old.name, old.search_text);
end;
create trigger if not exists tool_index_au after update of name, search_text on tool_index begin
    insert into tool_index_fts(tool_index_fts, rowid, name, search_text)
        values ('delete', old.id, old.name, old.search_text);
    insert into tool_index_fts(rowid, name, search_text) values (new.id, new.name, new.search_text);
end;

create table if not exists tool_config (
    name       text primary key,
    enabled    integer,
    scope      text check (scope in ('always', 'dm-only', 'group-only', 'admin-only')),
    updated_at real not null
);

create table if not exists tasks (
    id          integer primary key,
    chat_id     integer,
    description text not null,
    kind        text not null check (kind in ('agent', 'tool')),
    payload     text not null default '{{}}',
    run_at      real,
    repeat      text,
    status      text not null default 'pending'
                check (status in ('pending', 'running', 'done', 'failed', 'blocked', 'cancelled')),
    result      text,
    attempts    integer not null default 0,
    created_at  real not null,
    updated_at  real not null,
    last_run_at real
);
create index if not exists tasks_due on tasks(status, run_at);

create table if not exists task_dependencies (
    task_id    integer not null references tasks(id) on delete cascade,
    depends_on integer not null references tasks(id) on delete cascade,
    primary key (task_id, depends_on)
);

create table if not exists facts (
    id           integer primary key,
    category     text not null default 'general',
    key          text,
    value        text not null,
    scope        text not null,
    source       text not null default 'agent',
    importance   real not null default 0.5,
    access_count integer not null default 0,
    last_access  real,
    hash         text not null,
    embedded     integer not null default 0,
    created_at   real not null,
    updated_at   real not null
);
create index if not exists facts_scope_category on facts(scope, category);
create unique index if not exists facts_scope_key on facts(scope, category, key) where key is not null;
create unique index if not exists facts_scope_hash on facts(scope, hash);
create virtual table if not exists facts_fts using fts5(
    category, key, value, content='facts', content_rowid='id', tokenize='{FTS_TOKENIZER}'
);
create trigger if not exists facts_ai after insert on facts begin
    insert into facts_fts(rowid, category, key, value) values (new.id, new.category, new.key, new.value);
end;
create trigger if not exists facts_ad after delete on facts begin
    insert into facts_fts(facts_fts, rowid, category, key, value)
        values ('delete', old.id, old.category, old.key, old.value);
end;
create trigger if not exists facts_au after update of category, key, value on facts begin
    insert into facts_fts(facts_fts, rowid, category, key, value)
        values ('delete', old.id, old.category, old.key, old.value);
    insert into facts_fts(rowid, category, key, value) values (new.id, new.category, new.key, new.value);
end;
"""


def run_script(conn: Connection, script: str) -> None:
    """Run a multi-statement script inside the caller's transaction (``executescript`` would commit)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            conn.execute(pending)
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement: {pending.strip()[:80]}")


def _v1(conn: Connection) -> None:
    run_script(conn, _V1)


def _v2(conn: Connection) -> None:
    migrate_labels(conn, run_script)


def _v3(conn: Connection) -> None:
    migrate_fact_history(conn, run_script)


def _v4(conn: Connection) -> None:
    migrate_held(conn, run_script)


def _v5(conn: Connection) -> None:
    migrate_replies(conn, run_script)


def _v6(conn: Connection) -> None:
    migrate_feed_context(conn, run_script)


def _v7(conn: Connection) -> None:
    migrate_streams(conn, run_script)


def _v8(conn: Connection) -> None:
    migrate_mcp_pins(conn, run_script)


def _v9(conn: Connection) -> None:
    migrate_usage(conn, run_script)


def _v10(conn: Connection) -> None:
    migrate_topics(conn, run_script)


def _v11(conn: Connection) -> None:
    migrate_reactions(conn, run_script)


def _v12(conn: Connection) -> None:
    migrate_reply_parts(conn, run_script)


def _v13(conn: Connection) -> None:
    migrate_fact_sources(conn, run_script)


def _v14(conn: Connection) -> None:
    migrate_mcp_review(conn, run_script)


def _v15(conn: Connection) -> None:
    migrate_cache_writes(conn, run_script)


Migration = Callable[[Connection], None]

# Index i holds the step from version i to version i + 1. Append only; never edit a released step.
MIGRATIONS: list[Migration] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9, _v10, _v11, _v12, _v13, _v14, _v15]
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: Connection) -> int:
    exists = conn.execute("select 1 from sqlite_master where type='table' and name='meta'").fetchone()
    if not exists:
        return 0
    row = conn.execute("select value from meta where key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: Connection, migrations: list[Migration] | None = None) -> tuple[int, int]:
    """Apply missing migrations, each in its own transaction. Return (from_version, to_version)."""
    steps = MIGRATIONS if migrations is None else migrations
    start = current_version(conn)
    if start > len(steps):
        raise RuntimeError(
            f"database schema version {start} is newer than this Teleton supports ({len(steps)}); "
            "upgrade Teleton or restore a backup"
        )
    for version in range(start, len(steps)):
        conn.execute("begin immediate")
        try:
            steps[version](conn)
            conn.execute(
                "insert into meta(key, value) values ('schema_version', ?) "
                "on conflict(key) do update set value = excluded.value",
                (str(version + 1),),
            )
            conn.execute("commit")
        except BaseException:
            conn.execute("rollback")
            raise
    return start, len(steps)
