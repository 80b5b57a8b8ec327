"""Schema step 1 -> 2: privacy labels on stored data, clearances on tasks, held cross-chat sends (docs/privacy.md),
and the delivery record of docs/operations.md (a message's answer state, a task's delivery, quarantined items).

Existing data is labelled conservatively: whatever cannot be shown to belong to a group or to another
person becomes the owner's.

- knowledge: a ``label`` column. File chunks become ``owner`` (the next re-index labels each file by its
  path); a session summary of a group (``sessions/<negative id>/…``) becomes that group's ``chat:<id>``;
  every other summary and learned entry ``owner``.
- facts: the ``scope`` column now holds the fact's label. ``user`` and ``global`` become ``owner`` (a
  "global" fact may have been planted from a group, so it must not be shown anywhere it was not before);
  ``chat:<positive id>`` (another person's DM) becomes ``user:<id>``; anything malformed ``owner``.
- tasks: the clearance, principal and admin flag of the turn that scheduled them (NULL clearance on old
  rows: the chat's clearance is used when they run).
- pending_sends: sends to another chat held for the owner's approval.
- tg_messages.agent_note: why a message was not answered, or when its reply started to go out.
- tasks.interrupted / sending_at / delivered_at: a task cut by a crash runs again at most once, and its
  reply is sent once.
- quarantine: items that fail every time (a text the embedder rejects, …), kept aside with their error.

Archive rows and sessions carry no column of their own: their label is their chat's (``chat_id``), mapped
by ``teleton.privacy``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

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


def migrate_labels(conn: Connection, run_script: Callable[[Connection, str], None]) -> None:
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
