"""MCP servers in the real daemon (a subprocess): a tool shown to the owner, approved with the code of its
review and called end to end, the server's state in status.json and ``teleton status``, SIGHUP bringing in
a new server and dropping a removed one."""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from teleton.daemon.status_file import describe, read_status
from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, tool_use

pytestmark = pytest.mark.costly

FAKE = str(Path(__file__).parents[1] / "fakes" / "mcp_server.py")
OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}


def _server(*tools: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [FAKE], "read_only": True, "tools": {"include": list(tools)}}


def _events(root: Path, event: str) -> list[dict[str, Any]]:
    log_file = root / "daemon.log"
    if not log_file.exists():
        return []
    lines = log_file.read_text(errors="replace").splitlines()
    return [e for e in map(json.loads, filter(None, lines)) if e.get("event") == event]


def _adder(body: Body) -> Reply:
    """Calls mcp_calc_add when it is offered, then answers with what it returned."""
    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        result = next(b for b in last if b.get("type") == "tool_result")
        return text(f"the server said: {result['content']}")
    if any(t["name"] == "mcp_calc_add" for t in body.get("tools") or []):
        return tool_use(("mcp_calc_add", {"a": 19, "b": 23}))
    return text("no adder here")


def test_a_tool_is_called_end_to_end_and_sighup_swaps_servers(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    pong_api.responder = _adder
    config = write_config(daemon_root, pong_api.base_url, **{"mcp.servers": {"calc": _server("add")}})
    daemon = Daemon(daemon_root, config).start()
    status_file = daemon_root / "state" / "status.json"
    try:
        daemon.wait_for(lambda _: _events(daemon_root, "mcp_connected"))
        _approve(daemon, "calc", message_id=1)
        daemon.send(OWNER_DM, "what is 19 + 23?", message_id=2)
        daemon.wait_for(lambda _: len(daemon.sent(OWNER["id"])) >= 3)  # the review, the approval, the answer
        texts = [e["text"] for e in daemon.sent(OWNER["id"])]
        assert texts[0].startswith("MCP server calc: it connected for the first time")
        assert "> description: [MCP server calc] Add two integers." in texts[0]
        assert texts[1] == "Approved on calc: add. Offered from your next message."
        assert texts[2] == "the server said: > (from an outside server's tool (outside: mcp:calc)) 42"

        daemon.wait_for(lambda _: _mcp(status_file).get("calc", {}).get("tools"))
        status = read_status(status_file)
        assert status is not None and status.mcp["calc"]["state"] == "connected"
        assert "MCP server calc: connected, 1 tool" in describe(status)[1]

        # The owner swaps the server for another in the config: SIGHUP, no restart.
        config.write_text(config.read_text().replace("calc:", "maths:"))
        daemon.signal(signal.SIGHUP)
        daemon.wait_for(lambda _: any(e["server"] == "maths" for e in _events(daemon_root, "mcp_connected")))
        daemon.wait_for(lambda _: set(_mcp(status_file)) == {"maths"})
        _approve(daemon, "maths", message_id=3)
        daemon.send(OWNER_DM, "add two integers for me", message_id=4)  # tool RAG picks by meaning
        daemon.wait_for(lambda _: any(e["text"] == "no adder here" for e in daemon.sent(OWNER["id"])))
        offered = {t["name"] for t in pong_api.requests[-1].get("tools") or []}
        assert "mcp_maths_add" in offered and "mcp_calc_add" not in offered
    finally:
        daemon.stop()


def _approve(daemon: Daemon, server: str, message_id: int) -> None:
    """The owner reads the server's review in their DM and approves it with the code it gives."""
    daemon.wait_for(lambda _: any(f"/mcp approve {server} " in e["text"] for e in daemon.sent(OWNER["id"])))
    review = next(e for e in daemon.sent(OWNER["id"]) if f"/mcp approve {server} " in e["text"])
    assert review["plain"]  # shown as it is: never as Markdown
    command = re.search(rf"/mcp approve {server} \S+ [0-9a-f]{{8}}", review["text"])
    assert command is not None, review["text"]
    daemon.send(OWNER_DM, command.group(0), message_id=message_id)
    daemon.wait_for(lambda _: any(e["text"].startswith(f"Approved on {server}") for e in daemon.sent(OWNER["id"])))


def _mcp(status_file: Path) -> dict[str, Any]:
    status = read_status(status_file)
    return {} if status is None else status.mcp
