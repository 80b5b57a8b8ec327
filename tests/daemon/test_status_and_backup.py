"""`teleton status` from another shell, the single-instance lock, and a damaged database (backups: tests/backup)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teleton.daemon.instance_lock import AlreadyRunning, InstanceLock
from teleton.daemon.status_file import DaemonStatus, describe, read_status, write_status
from teleton.storage import Database

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    env.update(HOME=str(home), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_status_reports_running_daemon_and_last_error(isolated_home: Path) -> None:
    data_dir = isolated_home / ".teleton"
    data_dir.mkdir()
    status = DaemonStatus(pid=os.getpid(), started_at=time.time() - 3725, state="running", queue_depth=3)
    status.archived_messages = 1234
    status.last_error, status.last_error_at = "FloodWait 30s on send_message", time.time() - 60
    write_status(data_dir / "status.json", status)
    proc = _cli(isolated_home, "status")
    assert proc.returncode == 0
    assert "running (pid" in proc.stdout
    assert "up 1h 2m" in proc.stdout
    assert "queue depth 3" in proc.stdout and "archive 1,234 messages" in proc.stdout
    assert "FloodWait 30s on send_message" in proc.stdout


def test_status_when_not_running(isolated_home: Path) -> None:
    proc = _cli(isolated_home, "status")
    assert proc.returncode == 1
    assert "not running" in proc.stdout
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    running, text = describe(DaemonStatus(pid=dead.pid, started_at=0, updated_at=time.time()))
    assert not running and f"last pid {dead.pid}" in text


def test_status_detects_a_wedged_daemon(tmp_path: Path) -> None:
    path = tmp_path / "status.json"
    write_status(path, DaemonStatus(pid=os.getpid(), started_at=time.time()))
    status = read_status(path)
    assert status is not None
    running, text = describe(status, now=status.updated_at + 120)
    assert not running and "unresponsive" in text
    path.write_text("{not json")
    assert read_status(path) is None


def test_second_instance_is_refused(tmp_path: Path) -> None:
    first = InstanceLock(tmp_path / "teleton.lock")
    first.acquire()
    code = (
        "import sys; from pathlib import Path; from teleton.daemon.instance_lock import InstanceLock, AlreadyRunning\n"
        f"try: InstanceLock(Path({str(tmp_path / 'teleton.lock')!r})).acquire()\n"
        "except AlreadyRunning as e: print(e); sys.exit(3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and "another Teleton is running" in proc.stdout
    first.release()
    second = InstanceLock(tmp_path / "teleton.lock")
    second.acquire()  # free again after release
    with pytest.raises(AlreadyRunning):
        InstanceLock(tmp_path / "teleton.lock").acquire()
    second.release()


def _damage(path: Path) -> None:
    """Overwrite the middle of the file, as a failing disk or a stray write would."""
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\xff" * min(8192, size // 4))


def test_a_damaged_database_is_named_by_doctor_and_refused_at_start(isolated_home: Path) -> None:
    data = isolated_home / ".teleton"
    data.mkdir()
    config = data / "config.yaml"
    config.write_text("agent:\n  api_key: sk-ant-test\n")
    config.chmod(0o600)
    path = data / "teleton.db"

    async def fill() -> None:
        db = await Database.open(path)
        for chunk in range(20):
            await db.write(
                lambda c, k=chunk: c.executemany(
                    "insert into tg_messages(chat_id, message_id, date, text) values (?, ?, 0, ?)",
                    [(k, i, f"message {i} of chat {k} " * 5) for i in range(200)],
                )
            )
        await db.close()

    asyncio.run(fill())
    assert "OK   Database" in _cli(isolated_home, "doctor").stdout
    for damage, words in ((_damage, "damaged"), (lambda p: p.write_bytes(os.urandom(65536)), "cannot be opened")):
        damage(path)
        doctor = _cli(isolated_home, "doctor")
        assert "FAIL Database" in doctor.stdout and "teleton restore" in doctor.stdout, doctor.stdout
        start = _cli(isolated_home, "start", "--transport", f"loopback:{isolated_home / 'x.sock'}")
        assert start.returncode == 1
        errors = [line for line in start.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and words in errors[0] and "teleton restore" in errors[0], start.stderr
        assert "Traceback" not in start.stderr
        assert not (isolated_home / "x.sock").exists()  # never got as far as serving


def test_a_hundred_problems_are_one_doctor_line_and_its_fix(isolated_home: Path) -> None:
    """SQLite's quick_check returns a lost free-page list as one row of a hundred lines; doctor says one."""
    data = isolated_home / ".teleton"
    data.mkdir()
    path = data / "teleton.db"

    async def fill_and_free() -> None:
        db = await Database.open(path)
        await db.write(
            lambda c: c.executemany(
                "insert into tg_messages(chat_id, message_id, date, text) values (1, ?, 0, ?)",
                [(i, f"message {i} " * 40) for i in range(3000)],
            )
        )
        await db.execute("delete from tg_messages where message_id > 100")
        await db.checkpoint()
        await db.close()

    asyncio.run(fill_and_free())
    raw = bytearray(path.read_bytes())
    raw[32:40] = bytes(8)  # the header forgets its free-page list: every free page is "never used"
    path.write_bytes(bytes(raw))
    doctor = _cli(isolated_home, "doctor").stdout.splitlines()
    at = next(i for i, line in enumerate(doctor) if line.startswith("FAIL Database"))
    assert "damaged (Page " in doctor[at] and "never used; 99 more problems)" in doctor[at], doctor
    assert doctor[at + 1].strip().startswith("fix: stop Teleton, then restore the last backup with `teleton restore")
    assert not any("never used" in line for line in doctor[at + 1 :]), doctor
