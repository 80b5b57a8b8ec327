"""The start's check of every database page: before ready after a crash or on a first start, after ready
following a clean stop (it takes 10 s at 1M messages), and damage it finds then still stops the daemon."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from teleton.storage.sqlite_driver import pick_driver
from tests.daemon.harness import Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = pytest.mark.costly

MARKER = "teleton.db.clean-stop"


def _events(root: Path) -> list[str]:
    log_file = root / "daemon.log"
    lines = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
    return [json.loads(line)["event"] for line in lines if line.startswith("{")]


def _run_until_ready(root: Path, config: Path) -> Daemon:
    daemon = Daemon(root, config).start()
    ready = _events(root).count("teleton_ready")
    while _events(root).count("teleton_ready") == ready:
        daemon.pump()
    return daemon


def _order(events: list[str]) -> list[str]:
    return [e for e in events if e in ("database_checked", "teleton_ready")]


def test_the_check_runs_before_ready_after_a_crash_and_after_ready_after_a_clean_stop(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    config = write_config(daemon_root, pong_api.base_url)
    state = daemon_root / "state"
    daemon = _run_until_ready(daemon_root, config)
    assert _order(_events(daemon_root)) == ["database_checked", "teleton_ready"]  # a first start
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0 and (state / MARKER).exists()

    daemon = _run_until_ready(daemon_root, config)
    assert not (state / MARKER).exists()  # taken: a crash now leaves none
    while _events(daemon_root).count("database_checked") < 2:
        daemon.pump()
    assert _order(_events(daemon_root))[2:] == ["teleton_ready", "database_checked"]
    daemon.signal(signal.SIGKILL)
    daemon.wait()

    daemon = _run_until_ready(daemon_root, config)
    assert _order(_events(daemon_root))[4:] == ["database_checked", "teleton_ready"]  # after kill -9: before
    daemon.stop()


def test_damage_found_after_a_clean_stop_stops_the_daemon_with_the_damaged_line(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    config = write_config(daemon_root, pong_api.base_url)
    database = daemon_root / "state" / "teleton.db"
    daemon = _run_until_ready(daemon_root, config)
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0

    # A table nothing reads at start (a clean stop after it was written, so the marker is that file's)...
    conn = pick_driver().module.connect(str(database))
    conn.execute("create table filler(x text)")
    conn.executemany("insert into filler values (?)", [("x" * 500,)] * 400)
    conn.commit()
    root_page = conn.execute("select rootpage from sqlite_master where name = 'filler'").fetchone()[0]
    page_size = conn.execute("pragma page_size").fetchone()[0]
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    daemon = _run_until_ready(daemon_root, config)
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0
    # ...its pages then rot in place, size and time unchanged: the file opens, only the check finds them.
    seen = database.stat()
    with database.open("r+b") as f:
        f.seek((root_page - 1) * page_size)
        f.write(b"\xff" * 64)
    os.utime(database, ns=(seen.st_atime_ns, seen.st_mtime_ns))

    daemon = Daemon(daemon_root, config).start()
    code = daemon.wait()
    assert code == 78
    assert "teleton_ready" in _last_ready_run(daemon_root)
    assert "is damaged" in daemon.stderr() and "teleton restore" in daemon.stderr()
    assert not (database.parent / MARKER).exists()  # the next start checks before it is ready


def test_a_clean_stop_marker_does_not_outlive_its_database(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    """A database replaced (or deleted) after a clean stop is checked before ready: the marker was the old
    file's, not this one's."""
    config = write_config(daemon_root, pong_api.base_url)
    database = daemon_root / "state" / "teleton.db"
    daemon = _run_until_ready(daemon_root, config)
    daemon.signal(signal.SIGTERM)
    assert daemon.wait() == 0 and (database.parent / MARKER).exists()
    copy = database.with_name("copy.db")
    shutil.copy2(database, copy)  # the same bytes, another file, put in its place
    copy.replace(database)

    daemon = _run_until_ready(daemon_root, config)
    assert _order(_events(daemon_root))[2:] == ["database_checked", "teleton_ready"]
    daemon.stop()


def _last_ready_run(root: Path) -> list[str]:
    events = _events(root)
    return events[events.index("stopped") + 1 :]
