"""Schema step 1 -> 2: privacy labels on stored data, clearances on tasks, held cross-chat sends (docs/privacy.md),
and the delivery record (docs/operations.md): a message's answer note, a task's delivery, quarantined items.

Existing data is labelled conservatively: what cannot be shown to belong to a group or another person becomes
the owner's. Knowledge chunks and summaries get a ``label`` (a group's summary its ``chat:<id>``); a fact's
``scope`` becomes its label (``user`` and ``global`` the owner's, another person's DM ``user:<id>``); tasks
keep the clearance of the turn that scheduled them. Archive rows and sessions are labelled by their chat.
"""

from __future__ import annotations

import re

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

_DDL = """
alter table knowledge add column label text not null default 'owner';
create index if not exists knowledge_label on knowledge(label);

alter table tasks add column clearance text;
alter table tasks add column principal_id integer;
alter table tasks add column principal_admin integer not null default 0;
create index if not exists tasks_clearance on tasks(clearance, status);

create table if not exists pending_sends (
    id           integer primary key,
    from_chat_id integer not null,
    to_chat_id   integer not null,
    kind         text not null check (kind in ('message', 'forward', 'write', 'rename', 'fact')),
    payload      text not null,
    preview      text not null,
    exposure     text not null default '[]',
    status       text not null default 'pending'
                 check (status in ('pending', 'approved', 'denied', 'expired', 'sent', 'failed')),
    result       text,
    created_at   real not null,
    expires_at   real not null,
    decided_at   real,
    decided_by   integer
);
create index if not exists pending_sends_status on pending_sends(status, expires_at);

alter table tg_messages add column agent_note text;
create index if not exists tg_messages_agent_state on tg_messages(agent_state, date)
    where agent_state in ('archived', 'accepted', 'sending', 'failed');

alter table tasks add column interrupted integer not null default 0;
alter table tasks add column sending_at real;
alter table tasks add column delivered_at real;

create table if not exists quarantine (
    id         integer primary key,
    kind       text not null,
    item_id    integer not null,
    error      text not null,
    created_at real not null,
    unique (kind, item_id)
);
"""


def migrate(conn: Connection) -> None:
    run_script(conn, _DDL)
    conn.execute(
        "update knowledge set label = 'chat:' || substr(path, 10, instr(substr(path, 10), '/') - 1) "
        "where source = 'session' and path glob 'sessions/-[1-9]*/*'"
    )
    _relabel_facts(conn)


def _relabel_facts(conn: Connection) -> None:
    """Give every fact its label. Folding 'user', 'global' and malformed scopes into 'owner' may meet the
    unique (scope, hash) and (scope, category, key) indexes: the owner's own fact wins, an identical fact
    is dropped, and a fact with the same key keeps its value without the key."""
    rows = conn.execute(
        "select id, scope from facts order by case scope when 'owner' then 0 when 'user' then 1 "
        "when 'global' then 2 else 3 end, id"
    ).fetchall()
    for fact_id, scope in rows:
        new = _label_of(str(scope))
        if new == scope:
            continue
        duplicate = conn.execute(
            "select 1 from facts where scope = ? and hash = (select hash from facts where id = ?)", (new, fact_id)
        ).fetchone()
        if duplicate:
            conn.execute("delete from facts where id = ?", (fact_id,))
            continue
        conn.execute(
            "update facts set key = null where id = ? and exists (select 1 from facts f where f.scope = ? "
            "and f.category = facts.category and f.key = facts.key)",
            (fact_id, new),
        )
        conn.execute("update facts set scope = ?, embedded = 0 where id = ?", (new, fact_id))


def _label_of(scope: str) -> str:
    if re.fullmatch(r"chat:[1-9][0-9]*", scope):
        return "user:" + scope[5:]
    if scope in ("owner", "public") or re.fullmatch(r"(user:[1-9]|chat:-[1-9])[0-9]*", scope):
        return scope
    return "owner"
