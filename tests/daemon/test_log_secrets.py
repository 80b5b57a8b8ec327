"""No secret in the real daemon's log, and a flood of MCP stderr bounded there: an HTTP server reached at a
URL with ``?api_key=`` and a ``${NAME}`` header, a stdio server echoing its ``${NAME}`` value on stderr and
flooding it (tests/fakes/noisy_mcp_server.py). The daemon logs at debug, so the SDK's own lines naming the
URL are written (redacted) too."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from teleton.tools.mcp.stderr import STDERR_BURST
from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.mcp_http import served

pytestmark = pytest.mark.costly

NOISY = str(Path(__file__).parents[1] / "fakes" / "noisy_mcp_server.py")
OWNER_ID = cast(int, OWNER["id"])
OWNER_DM = {"id": OWNER_ID, "type": "dm", "title": ""}
QUERY_SECRET = "query-secret-5f4e3d2c1b"
HEADER_SECRET = "header-secret-9a8b7c6d5e"
ECHO_SECRET = "echo-secret-1a2b3c4d5e"
FLOOD_MB = 4


@pytest.fixture
def http_noisy() -> Iterator[int]:
    """The noisy server over Streamable HTTP, refusing any request without both secrets: its port."""
    env = {"EXPECT_API_KEY": QUERY_SECRET, "EXPECT_HEADER": HEADER_SECRET, "PATH": "/usr/bin:/bin"}
    with served(NOISY, env=env) as port:
        yield port


def _events(root: Path) -> list[dict[str, Any]]:
    log_file = root / "daemon.log"
    lines = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def _of(events: list[dict[str, Any]], event: str, server: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") == event and e.get("server") == server]


def _logged(root: Path, event: str, server: str) -> bool:
    return bool(_of(_events(root), event, server))


def test_no_secret_reaches_the_daemons_log_and_a_flood_stays_small(
    pong_api: FakeAnthropic, daemon_root: Path, http_noisy: int
) -> None:
    mark = daemon_root / "flooded"
    servers = {
        "web": {
            "url": f"http://127.0.0.1:{http_noisy}/mcp?api_key={QUERY_SECRET}",
            "headers": {"X-Api-Key": "${WEB_KEY}"},
            "read_only": True,
        },
        "noisy": {
            "command": sys.executable,
            "args": [NOISY],
            "env": {"ECHO_VALUE": "${NOISY_TOKEN}", "FLOOD_MB": str(FLOOD_MB), "FLOOD_MARK": str(mark)},
            "read_only": True,
        },
    }
    config = write_config(daemon_root, pong_api.base_url, **{"mcp.servers": servers, "logging.level": "debug"})
    daemon = Daemon(daemon_root, config)
    daemon.env = {"WEB_KEY": HEADER_SECRET, "NOISY_TOKEN": ECHO_SECRET}
    daemon.start()
    try:
        # web connects only with both secrets (the server refuses without them); noisy's first start floods
        # and exits, its stderr is read to the end (the count is logged then), the second start serves.
        daemon.wait_for(lambda _: _logged(daemon_root, "mcp_connected", "web"))
        daemon.wait_for(lambda _: _logged(daemon_root, "mcp_connected", "noisy"))
        daemon.wait_for(lambda _: _logged(daemon_root, "mcp_server_stderr_dropped", "noisy"))
        daemon.send(OWNER_DM, "hello there", message_id=1)
        daemon.wait_for(lambda _: any(e["text"].startswith("pong") for e in daemon.sent(OWNER_ID)))
    finally:
        daemon.stop()

    log_text = (daemon_root / "daemon.log").read_text(errors="replace")
    stderr_text = daemon.stderr()
    for secret in (QUERY_SECRET, HEADER_SECRET, ECHO_SECRET):
        assert secret not in log_text and secret not in stderr_text, secret
    assert "/mcp?api_key=[redacted]" in log_text  # the SDK's debug lines named the URL: redacted, not absent
    assert "my token is [redacted]" in log_text  # the echo was logged, without the value

    events = _events(daemon_root)
    stderr_lines = _of(events, "mcp_server_stderr", "noisy")
    dropped = _of(events, "mcp_server_stderr_dropped", "noisy")
    flood_lines = int(mark.read_text())  # as the server counted them, the 2 MB line among them
    first_window = events.index(dropped[0])
    assert len([e for e in stderr_lines if events.index(e) < first_window]) <= STDERR_BURST
    # Every line of the flood was read (the server wrote it all before it could exit), logged or counted.
    assert len(stderr_lines) + sum(e["count"] for e in dropped) >= flood_lines + 1  # + its greeting
    flood_bytes = FLOOD_MB * 1_000_000
    assert len(log_text) < flood_bytes // 50 and len(stderr_text) < flood_bytes // 50
