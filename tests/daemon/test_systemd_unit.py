"""The systemd unit: notify protocol, restart, sandboxing, and `systemd-analyze verify`."""

from __future__ import annotations

import configparser
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from teleton.daemon.runner import EXIT_FATAL
from teleton.daemon.systemd_notify import Notifier

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "teleton.service"
MCP_DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNIT)
    return parser


def test_unit_declares_notify_restart_user_and_sandbox() -> None:
    service = _unit()["Service"]
    assert service["Type"] == "notify"
    assert service["Restart"] == "on-failure"
    # A fatal stop (a revoked session, a deleted database) is not restarted into the same failure.
    assert str(EXIT_FATAL) in service["RestartPreventExitStatus"].split()
    assert service["User"] == "teleton"
    assert service["StateDirectory"] == "teleton"
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
    }.items():
        assert service[key] == value
    assert "/var/lib/teleton" in service["ReadWritePaths"]
    assert "WatchdogSec" in service


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd to run this check)")
    # verify checks that ExecStart exists: point it at a real executable in a copy of the unit.
    unit = tmp_path / "teleton.service"
    unit.write_text(UNIT.read_text().replace("/opt/teleton/venv/bin/teleton", shutil.which("true") or "/bin/true"))
    proc = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    problems = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if "teleton.service" in line and "Documentation" not in line
    ]
    assert proc.returncode == 0 and not problems, proc.stdout + proc.stderr


def test_notifier_sends_ready_watchdog_and_stopping(tmp_path: Path) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.settimeout(2)
        notifier = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "20000000"})
        assert notifier.watchdog_interval == 10.0
        notifier.ready("ready: 12 tools")
        notifier.notify("WATCHDOG=1")
        notifier.stopping()
        got = [server.recv(1024).decode() for _ in range(3)]
    assert got == ["READY=1\nSTATUS=ready: 12 tools", "WATCHDOG=1", "STOPPING=1"]


def test_notifier_is_silent_outside_systemd() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    assert notifier.notify("READY=1") is False


OPERATIONS = UNIT.parents[1] / "docs" / "operations.md"


def _install_block() -> str:
    text = OPERATIONS.read_text()
    section = text[text.index("## Running as a systemd service") :]
    return section[section.index("```bash\n") + 8 : section.index("```\n", section.index("```bash\n") + 8)]


def _created_by(block: str) -> set[str]:
    """The paths the documented install creates: venvs, installed files and folders, files written by tee."""
    created = set()
    for command in (c.strip() for line in block.splitlines() for c in line.split("&&")):
        words = command.split()
        if "venv" in words and "-m" in words:
            created.add(words[-1])
        elif "install" in words and words[words.index("install") - 1] == "sudo":
            created.add(words[-1])
        elif "tee" in words:
            created.add(words[words.index("tee") + 1])
    return created


def test_every_path_the_unit_names_exists_after_the_documented_install() -> None:
    service, unit = _unit()["Service"], _unit()["Unit"]
    created = _created_by(_install_block())
    wanted = {
        "Documentation": unit["Documentation"].removeprefix("file://"),
        "ExecStart": service["ExecStart"].split()[0],
        "EnvironmentFile": service["EnvironmentFile"].lstrip("-"),
        "StateDirectory": f"/var/lib/{service['StateDirectory']}",
    }
    for key, path in wanted.items():
        assert any(path == made or path.startswith(made + "/") for made in created), (key, path, created)


def test_the_documented_service_shell_runs_commands_as_the_unit_does() -> None:
    """`teleton-service status` / `doctor` (docs/operations.md) get the unit's user, variables and secrets."""
    text = OPERATIONS.read_text()
    block = text[text.index("<!-- ci:service-shell -->") : text.index("<!-- /ci:service-shell -->")]
    props = dict(p.split("=", 1) for p in block.replace("\\\n", " ").split() if "=" in p and p[0].isupper())
    environment = [p.split("=", 1)[1] for p in block.split() if p.startswith("Environment=")]
    service = _unit()["Service"]
    unit_environment = [line for line in UNIT.read_text().splitlines() if line.startswith("Environment=")]
    assert props["User"] == service["User"]
    assert props["EnvironmentFile"] == service["EnvironmentFile"]
    assert sorted(environment) == sorted(line.split("=", 1)[1] for line in unit_environment)
    assert service["ExecStart"].split()[0] in block
    assert "teleton-service status" in block and "teleton-service doctor" in block
    # What acts on the service's data (its config, pins, store), not the login user's ~/.teleton.
    assert "teleton-service mcp add" in block and "teleton-service dashboard" in block


def test_the_documented_mcp_drop_in_shows_one_home_folder_and_verifies(tmp_path: Path) -> None:
    """docs/mcp.md: under ProtectHome, a server reads a home folder only through the drop-in it gives."""
    text = MCP_DOC.read_text()
    block = text[text.index("<!-- ci:mcp-dropin -->") : text.index("<!-- /ci:mcp-dropin -->")]
    drop_in = block.split("```ini\n", 1)[1].split("```", 1)[0]
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(drop_in)
    assert parser["Service"]["ProtectHome"] == "tmpfs" and parser["Service"]["BindReadOnlyPaths"].startswith("/home/")
    assert _unit()["Service"]["ProtectHome"] == "yes"  # what the drop-in changes, so the docs' reason holds
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd to run this check)")
    folder = tmp_path / "notes"
    folder.mkdir()
    unit = tmp_path / "teleton.service"
    unit.write_text(UNIT.read_text().replace("/opt/teleton/venv/bin/teleton", shutil.which("true") or "/bin/true"))
    dropins = tmp_path / "teleton.service.d"
    dropins.mkdir()
    (dropins / "override.conf").write_text(drop_in.replace(parser["Service"]["BindReadOnlyPaths"], str(folder)))
    env = {**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"}  # so its drop-in folder is read (and judged)
    proc = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, env=env)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines() if "teleton.service" in line]
    assert proc.returncode == 0 and not [p for p in problems if "Documentation" not in p], proc.stdout + proc.stderr
