"""Private by default, with the usual umask 022: the data directory 0700 (narrowed, with one log line, when it
exists wider, as the README's venv leaves it), and every file Teleton writes 0600 — the chat history and
chat.log of `teleton chat`, the daemon's log file, status file, lock and database, an export, a backup.
`teleton doctor` names a file others can read; `teleton memory forget` scrubs the chat history too.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.history import FileHistory

from tests.cli.storage_faults import teleton
from tests.cli.test_chat_terminal import model, open_terminal
from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.waiting import until_sync

pytestmark = pytest.mark.costly

OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)  # what most systems give a login shell: files 0644, folders 0755 unless chosen
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _narrowed(log: Path) -> list[dict]:
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [e for e in events if e.get("event") == "data_dir_narrowed"]


@pytest.mark.usefixtures("umask_022")
def test_teleton_chat_keeps_its_history_and_log_private(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # as `python3 -m venv ~/.teleton/venv` leaves it
    fake_api.responder = model
    term = open_terminal(tmp_path, fake_api.base_url)
    try:
        term.type("my locker code is purple otter 7")
        term.wait_text("You said: my locker code is purple otter 7")
        term.type("what is 2+2")
        term.wait_text("2+2 is 4.")
    finally:
        term.close()

    assert _mode(data) == 0o700
    assert _mode(data / "chat_history") == 0o600 and _mode(data / "chat.log") == 0o600
    assert [(e["path"], e["old_mode"]) for e in _narrowed(data / "chat.log")] == [(str(data), "755")]
    assert "purple otter" in (data / "chat_history").read_text()

    # Forgetting from the terminal scrubs what was typed, entry by entry; the rest of the history stays.
    config = tmp_path / "config.yaml"
    proc = teleton("-c", str(config), "memory", "forget", "purple otter", "--yes", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "- entries of the `teleton chat` input history: 1" in proc.stdout
    left = list(FileHistory(str(data / "chat_history")).load_history_strings())
    assert left == ["what is 2+2"]
    assert _mode(data / "chat_history") == 0o600
    not_touched = next(line for line in proc.stdout.splitlines() if line.startswith("Not touched:"))
    assert "chat.log" in not_touched and "input history" not in not_touched  # the history was scrubbed here


@pytest.mark.usefixtures("umask_022")
def test_the_daemons_files_are_private(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    state = daemon_root / "state"
    state.mkdir(mode=0o755)
    (state / "stale.json").write_text("{}")  # a file someone left in the data dir: doctor's to name below
    config = write_config(daemon_root, pong_api.base_url)
    daemon = Daemon(daemon_root, config).start()
    try:
        daemon.send(OWNER_DM, "hello", message_id=1)
        daemon.wait_for(lambda _: daemon.sent())
        until_sync(lambda: (state / "status.json").exists())
        files = ["teleton.db", "teleton.db-wal", "teleton.db-shm", "teleton.lock", "status.json"]
        assert {name: _mode(state / name) for name in files} == dict.fromkeys(files, 0o600)
        assert _mode(state) == 0o700 and _mode(state / "workspace") == 0o700
        assert _mode(daemon_root / "daemon.log") == 0o600  # logging.file
    finally:
        daemon.stop()
    assert [e["old_mode"] for e in _narrowed(daemon_root / "daemon.log")] == ["755"]

    # doctor: one line names what others can read, with the command that fixes it.
    doctor = teleton("-c", str(config), "doctor", home=daemon_root / "home").stdout
    line = next(row for row in doctor.splitlines() if "Private files" in row)
    assert line.startswith("FAIL") and f"{state}/stale.json (644)" in line, doctor
    assert f"fix: chmod 600 {state}/stale.json" in doctor
    (state / "stale.json").chmod(0o600)
    state.chmod(0o750)
    doctor = teleton("-c", str(config), "doctor", home=daemon_root / "home").stdout
    assert f"{state} (750)" in doctor and f"fix: chmod 700 {state}" in doctor
    state.chmod(0o700)
    doctor = teleton("-c", str(config), "doctor", home=daemon_root / "home").stdout
    assert next(row for row in doctor.splitlines() if "Private files" in row).startswith("OK")


@pytest.mark.usefixtures("umask_022")
def test_an_export_and_a_backup_are_private(isolated_home: Path, tmp_path: Path) -> None:
    config = isolated_home / "config.yaml"
    config.write_text("embedding:\n  provider: none\n")
    config.chmod(0o600)
    assert teleton("-c", str(config), "memory", "index", home=isolated_home).returncode == 0
    data = isolated_home / ".teleton"
    assert _mode(data) == 0o700 and _mode(data / "teleton.db") == 0o600  # created by that first command

    out = tmp_path / "out"
    out.mkdir()
    export, backup = out / "memory.json", out / "copy.db"
    assert teleton("-c", str(config), "memory", "export", str(export), home=isolated_home).returncode == 0
    proc = teleton("-c", str(config), "backup", str(backup), home=isolated_home)
    assert proc.returncode == 0, proc.stderr
    assert _mode(export) == 0o600 and _mode(backup) == 0o600
    assert _mode(out) == 0o755  # a folder the user chose is theirs: only what Teleton wrote is narrowed
