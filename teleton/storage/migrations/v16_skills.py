"""Schema step 15 -> 16: skills (issue 59), one row each, with where it came from and what the owner approved.

A skill's files stay in the workspace (``skills/<name>/``, ``public/skills/<name>/``); the row pins them. An
owner's own skill (``source = 'owner'``) needs no approval; an installed or drafted one is offered only while
its files hash to ``approved_digest``, and ``told_digest`` says which change the owner was already told of.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table skills (
    name            text primary key,
    source          text not null check (source in ('owner', 'installed', 'draft')),
    came_from       text not null default '',       -- installed: the path or git URL it was added from
    steering        text not null default '[]',     -- draft: what may have steered the turn that wrote it (JSON)
    state           text not null check (state in ('enabled', 'pending', 'draft', 'archived')),
    approved_digest text,                           -- sha256 over its files as approved (NULL: owner's own)
    approved_files  text not null default '{}',     -- JSON path -> sha256, as approved
    told_digest     text,                           -- the last change the owner was told of
    uses            integer not null default 0,
    last_used       real,
    created_at      real not null,
    changed_at      real not null
);
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
