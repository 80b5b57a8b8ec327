"""Schema step 7 -> 8: what each MCP server's tools said when the owner approved them (issue 34).

A tool's description and schema are untrusted input that steer the model. ``mcp_pins`` keeps, per server and
tool, the hash of what was approved; a tool whose hash changes, or a tool that appears later, is
``pending`` (not offered to the model) until the owner approves it again. ``description`` is what the
owner is shown and approves.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table mcp_pins (
    server       text not null,
    tool         text not null,
    digest       text not null,                  -- sha256 of the name, description and input schema
    description  text not null,
    state        text not null check (state in ('approved', 'pending')),
    changed_at   real not null,
    primary key (server, tool)
);
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
