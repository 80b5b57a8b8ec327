"""`teleton setup --dashboard` (and the wizard's question, in test_setup_login) turns the dashboard on with a
login token of its own in the 0600 config; run again, the token stays; `--no-dashboard` turns it off; without
the web extra it prints the command to install it."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from teleton.config import load_config
from teleton.providers.extras import install_command
from tests.cli.test_setup_login import _cli
from tests.conftest import without_extra


def _setup(path: Path, *flags: str) -> Any:
    return CliRunner().invoke(_cli(), ["setup", "--non-interactive", "--mode", "terminal", *flags], terminal_width=200)


def test_a_scripted_setup_turns_the_dashboard_on_with_a_token_and_off(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    result = _setup(path, "--dashboard")
    assert result.exit_code == 0, result.output
    web = load_config(path).web
    assert web.enabled and web.token and len(web.token) >= 40 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "dashboard: the daemon serves it on http://127.0.0.1:8765/" in result.output
    assert _setup(path, "--dashboard").exit_code == 0 and load_config(path).web.token == web.token  # kept
    assert _setup(path, "--no-dashboard").exit_code == 0 and not load_config(path).web.enabled


def test_without_the_web_extra_it_says_what_to_install(tmp_path: Path, monkeypatch: Any) -> None:
    without_extra(monkeypatch, "web")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    result = _setup(path, "--dashboard")
    assert result.exit_code == 0, result.output
    assert f"install the web extra first (about 5 MB): {install_command('web')}" in result.output
