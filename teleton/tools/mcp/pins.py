"""Which MCP tools the owner approved, pinned by the hash of what they said (``mcp_pins``, schema step 8).

A server's first connect pins every tool it lists (the owner is shown them once, in the notice of
``servers.McpServers`` or by ``teleton mcp add``); from then on a tool whose name, description or schema
hashes differently, or a tool that was not there, is pending: kept from the model until the owner approves
it (``teleton mcp approve`` or ``/mcp approve`` in the owner's DM). ``check`` reports each change once.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from teleton.storage.database import Database, connect
from teleton.storage.sqlite_driver import Connection, pick_driver

if TYPE_CHECKING:
    from teleton.tools.mcp.connection import RemoteTool


@dataclass(frozen=True)
class Pin:
    digest: str
    state: str  # approved | pending
    description: str


@dataclass(frozen=True)
class Checked:
    usable: frozenset[str]  # tool names (the server's) the model may be offered
    changed: tuple[str, ...]  # tools newly held back by this check (to report once)
    first: bool  # the server had no pins: everything was pinned now


def tool_digest(tool: RemoteTool) -> str:
    text = json.dumps([tool.name, tool.description, tool.input_schema], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


async def check(db: Database, server: str, tools: Sequence[RemoteTool]) -> Checked:
    """Compare ``tools`` with the pins of ``server``: usable names, and what changed since the last look."""
    now = time.time()

    def run(conn: Connection) -> Checked:
        rows = conn.execute("select tool, digest, state from mcp_pins where server = ?", (server,)).fetchall()
        pinned = {row[0]: (row[1], row[2]) for row in rows}
        first = not pinned
        usable: set[str] = set()
        changed: list[str] = []
        for tool in tools:
            digest = tool_digest(tool)
            old = pinned.get(tool.name)
            if first or (old is not None and old == (digest, "approved")):
                state = "approved"
                usable.add(tool.name)
            else:
                state = "pending"
                if old is None or old[0] != digest:
                    changed.append(tool.name)
            if old != (digest, state):
                conn.execute(
                    "insert into mcp_pins(server, tool, digest, description, state, changed_at) "
                    "values (?, ?, ?, ?, ?, ?) on conflict(server, tool) do update set digest = excluded.digest, "
                    "description = excluded.description, state = excluded.state, changed_at = excluded.changed_at",
                    (server, tool.name, digest, tool.description, state, now),
                )
        return Checked(frozenset(usable), tuple(changed), first)

    return await db.write(run)


async def approve(db: Database, server: str, tool: str | None = None) -> list[str]:
    """Approve ``server``'s pending tools (or just ``tool``) as last seen; the names approved."""

    def run(conn: Connection) -> list[str]:
        sql = "select tool from mcp_pins where server = ? and state = 'pending'"
        params: tuple[str, ...] = (server,)
        if tool is not None:
            sql, params = sql + " and tool = ?", (server, tool)
        names = [row[0] for row in conn.execute(sql, params).fetchall()]
        conn.execute(
            f"update mcp_pins set state = 'approved', changed_at = ? where server = ? and tool in "
            f"({','.join('?' * len(names))})",
            (time.time(), server, *names),
        )
        return sorted(names)

    return await db.write(run)


async def forget(db: Database, server: str) -> None:
    """Drop ``server``'s pins (``teleton mcp remove``): added again, it starts from a first connect."""
    await db.execute("delete from mcp_pins where server = ?", (server,))


async def pins(db: Database, server: str | None = None) -> list[tuple[str, str, str, str]]:
    """(server, tool, state, description) of every pin, or of ``server``'s."""
    sql = "select server, tool, state, description from mcp_pins"
    rows = await (
        db.fetchall(sql + " where server = ? order by tool", (server,))
        if server
        else db.fetchall(sql + " order by server, tool")
    )
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def stored(database: Path) -> dict[str, dict[str, Pin]]:
    """server -> tool -> its pin, read without writing (``teleton mcp list``/``test``, ``doctor``): a database
    not created or not migrated yet holds none."""
    if not database.exists():
        return {}
    conn = connect(database, pick_driver(), vectors=False, readonly=True)
    try:
        if conn.execute("select 1 from sqlite_master where name = 'mcp_pins'").fetchone() is None:
            return {}
        rows = conn.execute("select server, tool, digest, state, description from mcp_pins").fetchall()
    finally:
        conn.close()
    found: dict[str, dict[str, Pin]] = {}
    for server, tool, digest, state, description in rows:
        found.setdefault(server, {})[tool] = Pin(digest, state, description)
    return found
