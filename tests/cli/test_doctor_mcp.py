"""`teleton doctor` for MCP servers: offline, each enabled server's program on PATH (or its URL), every
``${NAME}`` it reads set, the mcp extra; ``--online``, a real connect to the fake server (tests/fakes/
mcp_server.py) that counts its tools and those waiting for the owner's approval."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from teleton.cli.doctor import Check, run_checks
from teleton.cli.main import app
from teleton.providers.extras import install_command
from tests.conftest import without_extra

FAKE = str(Path(__file__).parents[1] / "fakes" / "mcp_server.py")


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model key and no Telegram: ``--online`` checks only what MCP needs, and nothing leaves 127.0.0.1."""
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def write(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    config = {"storage": {"data_dir": str(tmp_path / "data")}, "embedding": {"provider": "none"}}
    path.write_text(yaml.safe_dump({**config, "mcp": {"servers": servers}}))
    path.chmod(0o600)
    return path


def mcp_checks(path: Path, *, online: bool = False) -> dict[str, Check]:
    return {c.name: c for c in run_checks(path, online=online) if c.name.startswith("MCP")}


def test_a_missing_program_and_an_unset_variable_each_fail_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CALC_TOKEN", "set-here")
    monkeypatch.delenv("WEB_TOKEN_UNSET", raising=False)
    path = write(tmp_path, {
        "calc": {"command": sys.executable, "args": [FAKE], "env": {"TOKEN": "${CALC_TOKEN}"}},
        "gone": {"command": "no-such-mcp-server"},
        "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${WEB_TOKEN_UNSET}"}},
        "later": {"command": "no-such-mcp-server", "enabled": False},
    })  # fmt: skip
    found = mcp_checks(path)
    assert set(found) == {"MCP extra", "MCP calc", "MCP gone", "MCP web", "MCP web ${WEB_TOKEN_UNSET}", "MCP later"}
    assert found["MCP extra"].ok is True and found["MCP calc"].ok is True and found["MCP web"].ok is True
    gone = found["MCP gone"]
    assert (gone.ok, gone.detail) == (False, "'no-such-mcp-server' not found on PATH")
    assert gone.fix == "install it, or set mcp.servers.gone.command to its full path"
    unset = found["MCP web ${WEB_TOKEN_UNSET}"]
    assert unset.ok is False and unset.detail.startswith("mcp.servers.web.headers.Authorization reads")
    assert unset.fix.startswith("export WEB_TOKEN_UNSET=...")
    assert found["MCP later"].ok is None  # disabled: not checked, not failed


def test_online_connects_and_counts_what_waits_for_approval(tmp_path: Path) -> None:
    path = write(tmp_path, {})
    added = CliRunner().invoke(app, ["-c", str(path), "mcp", "add", "calc", "--", sys.executable, FAKE])
    assert added.exit_code == 0, added.output
    assert mcp_checks(path, online=True)["MCP calc (online)"].detail == "9 tools"

    config = yaml.safe_load(path.read_text())
    config["mcp"]["servers"]["calc"]["env"] = {"ADD_DESCRIPTION": "Add two integers, and more."}
    config["mcp"]["servers"]["dead"] = {"command": sys.executable, "args": ["-c", "pass"]}
    path.write_text(yaml.safe_dump(config))
    found = mcp_checks(path, online=True)
    calc = found["MCP calc (online)"]
    assert (calc.ok, calc.detail) == (True, "9 tools, 1 new or changed, held until approved (teleton mcp approve calc)")
    dead = found["MCP dead (online)"]
    assert dead.ok is False and dead.detail.startswith("MCP server 'dead': ") and "\n" not in dead.detail


def test_without_the_extra_the_fix_is_its_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without_extra(monkeypatch, "mcp")
    found = mcp_checks(write(tmp_path, {"calc": {"command": sys.executable, "args": [FAKE]}}), online=True)
    assert found["MCP extra"].ok is False and found["MCP extra"].fix == install_command("mcp")
    assert "MCP calc (online)" not in found  # not tried: the one line above says what is missing
