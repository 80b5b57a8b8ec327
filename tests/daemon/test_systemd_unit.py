"""The systemd unit: notify protocol, restart, sandboxing, and `systemd-analyze verify`."""

from __future__ import annotations

import configparser
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from teleton.daemon.runner import EXIT_FATAL
from teleton.daemon.systemd_notify import Notifier

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "teleton.service"


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
