"""The Logs page: the log file's last lines at a chosen level and up, then what is appended, live; a secret
that reached a line is redacted on the way out; without a file, where the daemon's log goes is said: its
service's journal when systemd runs it as one (named from its cgroup), else its standard error."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from teleton.config import load_config
from teleton.daemon.dashboard import start_dashboard
from teleton.web.logs_view import journal_unit, unit_of

TOKEN = "logs-" + "l" * 40
SAME_ORIGIN = {"sec-fetch-site": "same-origin"}


def line(level: str, event: str, **extra: str) -> str:
    return json.dumps({"event": event, "level": level, "timestamp": "2026-11-27T02:00:00Z", **extra}) + "\n"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Path]]:
    log_file = tmp_path / "daemon.log"
    log_file.write_text(line("info", "turn_done", chat_id="5") + line("warning", "tool_timeout", tool="web_fetch"))
    path = tmp_path / "config.yaml"
    path.write_text(
        f"storage: {{data_dir: {tmp_path / 'data'}}}\nembedding: {{provider: none}}\n"
        f"web: {{token: {TOKEN}, port: 0}}\nlogging: {{file: {log_file}, format: json}}\n"
    )
    path.chmod(0o600)
    server = await start_dashboard(load_config(path, env={}), lambda: None)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as http:
            await http.post("/login", data={"token": TOKEN}, headers=SAME_ORIGIN)
            yield http, log_file
    finally:
        await server.stop()


async def test_the_last_lines_from_a_level_up(served: tuple[httpx.AsyncClient, Path]) -> None:
    http, _ = served
    everything = (await http.get("/logs", params={"level": "info"})).text
    warnings = (await http.get("/logs", params={"level": "warning"})).text
    assert "turn_done" in everything and "tool_timeout" in everything
    assert "turn_done" not in warnings and 'class="level-warning"' in warnings and "tool_timeout" in warnings


async def test_new_lines_arrive_live_and_a_secret_in_one_is_redacted(served: tuple[httpx.AsyncClient, Path]) -> None:
    http, log_file = served
    async with http.stream("GET", "/logs/events", params={"level": "warning"}) as events:
        with log_file.open("a") as handle:
            handle.write(line("info", "not_shown_below_warning"))
            handle.write(line("error", "model_failed", error="401 for key sk-ant-api03-" + "k" * 30))
        async for raw in events.aiter_lines():
            if raw.startswith("data: "):
                got = json.loads(raw[6:])
                break
    assert got["level"] == "error" and "model_failed" in got["text"]
    assert "sk-ant-api03" not in got["text"] and "[redacted]" in got["text"]


async def test_without_a_log_file_the_daemons_page_says_where_its_log_goes(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"storage: {{data_dir: {tmp_path}}}\nembedding: {{provider: none}}\nweb: {{token: {TOKEN}, port: 0}}\n"
    )
    path.chmod(0o600)
    server = await start_dashboard(load_config(path, env={}), lambda: None)  # served by this process, a daemon
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as http:
            await http.post("/login", data={"token": TOKEN}, headers=SAME_ORIGIN)
            page = (await http.get("/logs")).text
    finally:
        await server.stop()
    unit = unit_of(os.getpid())  # this machine's: a test run that a systemd service started has one
    if unit is None:
        assert "the daemon&#39;s standard error, in the terminal teleton start runs in" in page
        assert "journalctl" not in page
    else:
        assert f"the service&#39;s journal: journalctl {unit} -f" in page


def test_the_journal_is_named_for_a_systemd_service_alone() -> None:
    # /proc/PID/cgroup as Linux writes it: the unified hierarchy (v2), and systemd's own beside others (v1).
    assert journal_unit("0::/system.slice/teleton.service\n") == "-u teleton"
    assert journal_unit("4:memory:/system.slice/x.service\n1:name=systemd:/system.slice/teleton.service\n0::/\n") == (
        "-u teleton"
    )
    user_unit = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/teleton.service\n"
    assert journal_unit(user_unit) == "--user -u teleton"
    assert journal_unit("0::/user.slice/user-1000.slice/session-3.scope\n") is None  # a login's terminal
    assert journal_unit("0::/user.slice/user-1000.slice/user@1000.service/init.scope\n") is None
    assert journal_unit("9:name=systemd:/\n0::/\n") is None  # a container, or no systemd
