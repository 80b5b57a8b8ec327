"""Which MCP tools the owner approved, pinned by the hash of exactly what they said (``mcp_pins``).

A tool's name, description and schema are the server's words, read by the model as instructions, so a tool is
offered only as approved: ``approved`` (the owner was shown this exact text and approved it), ``pending`` (new
or changed: kept from the model until approved), ``unreviewed`` (pinned before approvals were bound to text,
schema step 14: offered, as the server's words that steer the turn). ``check`` reports each change once;
``approve`` approves only the digests the owner was shown (docs/mcp.md, "The rules a server's tools live under").
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teleton.storage.database import Database, connect
from teleton.storage.sqlite_driver import Connection, pick_driver
from teleton.tools.held import CODE_LENGTH  # an approval code is as long as a held item's

if TYPE_CHECKING:
    from teleton.tools.mcp.connection import RemoteTool

APPROVED, PENDING, UNREVIEWED = "approved", "pending", "unreviewed"
WAITING = (PENDING, UNREVIEWED)  # what an approval may take


@dataclass(frozen=True)
class Pin:
    tool: str
    digest: str
    state: str  # approved | pending | unreviewed
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class Checked:
    usable: Mapping[str, bool]  # tool names (the server's) the model may be offered -> approved by the owner
    changed: tuple[str, ...]  # tools newly held back by this check (to report once)
    first: bool  # the server had no pins: everything waits for the owner's first look


def tool_digest(tool: RemoteTool) -> str:
    text = json.dumps([tool.name, tool.description, tool.input_schema], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def approval_code(server: str, shown: Sequence[Pin]) -> str:
    """What ``/mcp approve`` must be given: it stands for exactly these tools with exactly this text, so an
    approval of a notice cannot release a text the server changed after it was shown."""
    pairs = sorted((pin.tool, pin.digest) for pin in shown)
    return hashlib.sha256(json.dumps([server, pairs]).encode()).hexdigest()[:CODE_LENGTH]


async def check(db: Database, server: str, tools: Sequence[RemoteTool]) -> Checked:
    """Compare ``tools`` with the pins of ``server``: usable names, and what changed since the last look."""
    now = time.time()

    def run(conn: Connection) -> Checked:
        rows = conn.execute("select tool, digest, state from mcp_pins where server = ?", (server,)).fetchall()
        pinned = {row[0]: (row[1], row[2]) for row in rows}
        usable: dict[str, bool] = {}
        changed: list[str] = []
        for tool in tools:
            digest = tool_digest(tool)
            old = pinned.get(tool.name)
            if old is not None and old[0] == digest and old[1] in (APPROVED, UNREVIEWED):
                state = old[1]
                usable[tool.name] = state == APPROVED
            else:
                state = PENDING
                if old is None or old[0] != digest:
                    changed.append(tool.name)
            if old != (digest, state):
                conn.execute(
                    "insert into mcp_pins(server, tool, digest, description, input_schema, state, changed_at) "
                    "values (?, ?, ?, ?, ?, ?, ?) on conflict(server, tool) do update set digest = excluded.digest, "
                    "description = excluded.description, input_schema = excluded.input_schema, "
                    "state = excluded.state, changed_at = excluded.changed_at",
                    (server, tool.name, digest, tool.description, _schema(tool), state, now),
                )
        return Checked(usable, tuple(changed), not pinned)

    return await db.write(run)


async def pin_approved(db: Database, server: str, tools: Sequence[RemoteTool]) -> None:
    """``teleton mcp add``: the owner was just shown ``tools`` whole; earlier pins of the name are dropped."""
    now = time.time()

    def run(conn: Connection) -> None:
        conn.execute("delete from mcp_pins where server = ?", (server,))
        for tool in tools:
            conn.execute(
                "insert into mcp_pins(server, tool, digest, description, input_schema, state, changed_at) "
                "values (?, ?, ?, ?, ?, ?, ?)",
                (server, tool.name, tool_digest(tool), tool.description, _schema(tool), APPROVED, now),
            )

    await db.write(run)


async def approve(db: Database, server: str, code: str, tool: str | None = None) -> list[str] | None:
    """Approve ``server``'s waiting tools (or just ``tool``) if ``code`` is the code of them as they are
    pinned now; the names approved, or None when the code stands for another text (it changed since)."""

    def run(conn: Connection) -> list[str] | None:
        waiting = [pin for pin in _read(conn, server) if pin.state in WAITING and tool in (None, pin.tool)]
        if not waiting or approval_code(server, waiting) != code.strip().lower():
            return None
        for pin in waiting:
            conn.execute(
                "update mcp_pins set state = ?, changed_at = ? where server = ? and tool = ? and digest = ?",
                (APPROVED, time.time(), server, pin.tool, pin.digest),
            )
        return sorted(pin.tool for pin in waiting)

    return await db.write(run)


async def waiting(db: Database, server: str, tool: str | None = None) -> list[Pin]:
    """``server``'s tools that wait for the owner (or ``tool`` alone), as pinned: what an approval shows."""
    pins = await db.read(lambda conn: _read(conn, server))
    return [pin for pin in pins if pin.state in WAITING and tool in (None, pin.tool)]


async def forget(db: Database, server: str) -> None:
    """Drop ``server``'s pins (``teleton mcp remove``): added again, it starts from a first connect."""
    await db.execute("delete from mcp_pins where server = ?", (server,))


def stored(database: Path) -> dict[str, dict[str, Pin]]:
    """server -> tool -> its pin, read without writing (``teleton mcp list``/``test``, ``doctor``): a database
    not created or not migrated yet holds none."""
    if not database.exists():
        return {}
    conn = connect(database, pick_driver(), vectors=False, readonly=True)
    try:
        columns = {row[1] for row in conn.execute("pragma table_info(mcp_pins)").fetchall()}
        if "input_schema" not in columns:
            return {}
        servers = [row[0] for row in conn.execute("select distinct server from mcp_pins").fetchall()]
        found = {server: {pin.tool: pin for pin in _read(conn, server)} for server in servers}
    finally:
        conn.close()
    return found


def _read(conn: Connection, server: str) -> list[Pin]:
    rows = conn.execute(
        "select tool, digest, state, description, input_schema from mcp_pins where server = ? order by tool",
        (server,),
    ).fetchall()
    return [Pin(row[0], row[1], row[2], row[3], _loads(row[4])) for row in rows]


def _schema(tool: RemoteTool) -> str:
    return json.dumps(tool.input_schema, ensure_ascii=False, sort_keys=True)


def _loads(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
