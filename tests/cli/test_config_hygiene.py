"""What `teleton start` and `teleton chat` say about the config before they run anything: a secret in a
file others may read is refused, and a config that cannot start is described in full, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times


def teleton(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    env.update({"HOME": str(home), "COLUMNS": "200"})
    return subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", *args], capture_output=True, text=True, env=env, timeout=120
    )


def _config(home: Path, text: str, mode: int) -> Path:
    folder = home / ".teleton"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(text)
    os.chmod(path, mode)
    return path


SECRET = "agent:\n  api_key: sk-ant-not-a-real-key\n"


@pytest.mark.parametrize("command", [("start",), ("chat",)])
def test_a_secret_readable_by_others_is_refused(isolated_home: Path, command: tuple[str, ...]) -> None:
    path = _config(isolated_home, SECRET, 0o644)
    proc = teleton(*command, home=isolated_home)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"chmod 600 {path}" in lines[0] and "agent.api_key" in lines[0]
    assert "sk-ant-not-a-real-key" not in proc.stderr + proc.stdout
    assert proc.stdout == ""


def test_insecure_config_lets_it_run_and_0600_needs_no_flag(isolated_home: Path) -> None:
    path = _config(isolated_home, SECRET, 0o640)
    proc = teleton("--insecure-config", "start", home=isolated_home)
    # Past the mode check: what stops it now is the missing Telegram account, not the mode.
    assert proc.returncode == 2
    assert "chmod" not in proc.stderr and "no Telegram account yet" in proc.stderr
    os.chmod(path, 0o600)
    proc = teleton("start", home=isolated_home)
    assert "chmod" not in proc.stderr and "no Telegram account yet" in proc.stderr


def test_a_world_readable_config_without_secrets_is_fine(isolated_home: Path) -> None:
    _config(isolated_home, "agent:\n  model: claude-sonnet-4-5\n", 0o644)
    proc = teleton("start", home=isolated_home)
    assert "chmod" not in proc.stderr


def test_start_names_everything_missing_at_once(isolated_home: Path) -> None:
    """A half-written user-mode config and no model key: one line lists all of it, so one run shows it all."""
    _config(isolated_home, "telegram:\n  mode: user\n  api_id: 12345\n", 0o600)
    proc = teleton("start", home=isolated_home)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line
    for key in ("telegram.api_hash", "telegram.phone", "agent.api_key"):
        assert key in line, line


def test_an_mcp_servers_written_token_is_a_secret_and_a_named_one_is_not(isolated_home: Path) -> None:
    server = "mcp:\n  servers:\n    cal:\n      url: https://cal.example.org/mcp\n"
    server += "      headers: {Authorization: '%s'}\n"
    path = _config(isolated_home, server % "Bearer tok-written-here", 0o644)
    proc = teleton("start", home=isolated_home)
    assert proc.returncode == 2 and "mcp.servers.cal.headers.Authorization" in proc.stderr
    assert "tok-written-here" not in proc.stderr + proc.stdout
    path.write_text(server % "Bearer ${CAL_TOKEN}")  # read from the environment at connect time
    assert "chmod" not in teleton("start", home=isolated_home).stderr
