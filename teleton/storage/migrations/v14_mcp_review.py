"""Schema step 13 -> 14: an MCP tool is approved by the owner for exactly the text they were shown (issue 53).

Until this step a server's first connect pinned every tool as approved, unseen (or seen cut at 300
characters). Those pins become ``unreviewed``: still offered, but their words count as the server's, so a
turn they are offered to is steered by them (``teleton.privacy.egress``) until the owner approves them.
``input_schema`` keeps the schema as the daemon saw it, so an approval shows what the model is given whole.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table mcp_pins_new (
    server        text not null,
    tool          text not null,
    digest        text not null,                  -- sha256 of the name, description and input schema
    description   text not null,
    input_schema  text not null default '{}',     -- JSON, as the server listed it
    state         text not null check (state in ('approved', 'pending', 'unreviewed')),
    changed_at    real not null,
    primary key (server, tool)
);
insert into mcp_pins_new(server, tool, digest, description, state, changed_at)
    select server, tool, digest, description,
           case state when 'approved' then 'unreviewed' else state end, changed_at
    from mcp_pins;
drop table mcp_pins;
alter table mcp_pins_new rename to mcp_pins;
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
