"""The daemon serves the dashboard in its own loop with ``web.enabled`` (issue 35), and a dashboard that cannot
start (its port taken) is said while the daemon goes on answering."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx

from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic

TOKEN = "daemon-" + "d" * 40
OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}


def _events(root: Path, event: str) -> list[dict[str, Any]]:
    log_file = root / "daemon.log"
    if not log_file.exists():
        return []
    lines = log_file.read_text(errors="replace").splitlines()
    return [e for e in map(json.loads, filter(None, lines)) if e.get("event") == event]


def test_the_daemon_serves_its_live_status(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    config = write_config(daemon_root, pong_api.base_url, **{"web": {"enabled": True, "port": 0, "token": TOKEN}})
    daemon = Daemon(daemon_root, config).start()
    try:
        daemon.wait_for(lambda _: _events(daemon_root, "dashboard_started"))
        url = _events(daemon_root, "dashboard_started")[0]["url"]
        daemon.send(OWNER_DM, "hello", message_id=1)
        daemon.wait_for(lambda _: len(daemon.sent(OWNER["id"])) == 1)
        host = url.split("//")[1].rstrip("/")
        with httpx.Client(base_url=url, timeout=30) as http:
            http.post("/login", data={"token": TOKEN}, headers={"origin": f"http://{host}"})
            page = http.get("/status")
        assert page.status_code == 200 and f"running (pid {daemon.proc.pid}" in page.text  # type: ignore[union-attr]
        assert "read-only" not in page.text
    finally:
        daemon.stop()


def test_a_dashboard_that_cannot_listen_leaves_the_daemon_answering(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = write_config(daemon_root, pong_api.base_url, **{"web": {"enabled": True, "port": port}})
        daemon = Daemon(daemon_root, config).start()
        try:
            daemon.wait_for(lambda _: _events(daemon_root, "dashboard_not_started"))
            assert "Address already in use" in _events(daemon_root, "dashboard_not_started")[0]["error"]
            daemon.send(OWNER_DM, "still there?", message_id=1)
            daemon.wait_for(lambda _: len(daemon.sent(OWNER["id"])) == 1)
        finally:
            daemon.stop()
