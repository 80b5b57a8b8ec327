"""Schema step 0 -> 1: the first release's tables. The archive of Telegram chats, users and messages (with the
feed's keyword index), knowledge chunks, sessions, facts, tasks, the tool index and config, the embedding cache
and the exec audit. Later steps changed most of them: ``docs/schema.sql`` is the schema as it is now.
"""

from __future__ import annotations

from teleton.storage.feed_context import feed_triggers
from teleton.storage.migrations.sql import FTS_TOKENIZER, fts_index, run_script
from teleton.storage.sqlite_driver import Connection

DDL = f"""
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
{fts_index("knowledge", ("heading", "text"))}

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
{fts_index("tool_index", ("name", "search_text"))}

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
{fts_index("facts", ("category", "key", "value"))}
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
