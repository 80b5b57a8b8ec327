"""The real daemon whose database file is deleted or replaced while it runs: it stops with one line (exit 78),
`teleton status` and `teleton doctor` say why, and the next start tells the owner once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from teleton.daemon.database_watch import MARKER, DatabaseWatch
from teleton.daemon.runner import EXIT_FATAL
from teleton.storage import Database, connect
from teleton.storage.sqlite_driver import pick_driver
from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.waiting import until_sync

pytestmark = pytest.mark.costly

OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
NOTICE = "because the database file was deleted or replaced while I ran"


def _cli(root: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    env.update(HOME=str(root / "home"), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(config), *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def _answered(daemon: Daemon, message: str, message_id: int) -> None:
    daemon.send(OWNER_DM, message, message_id=message_id)
    daemon.wait_for(lambda _: any(message in e["text"] for e in daemon.sent(OWNER["id"])))


def _lose_database(root: Path, config: Path, lose: str, how: str) -> None:
    """Start, answer one message, lose the database file (``lose``: delete | replace); the daemon stops."""
    state = root / "state"
    daemon = Daemon(root, config).start()
    try:
        _answered(daemon, "before the loss", 1)
        db = state / "teleton.db"
        if lose == "delete":
            db.unlink()  # the -wal and -shm stay: only the main file is the database's identity
        else:  # a copy restored over it while the daemon runs (cp, then mv: a new file at the path)
            copy = root / "copy.db"
            source, target = connect(db, pick_driver(), vectors=False), connect(copy, pick_driver(), vectors=False)
            source.backup(target)
            source.close()
            target.close()
            os.replace(copy, db)
        code = daemon.wait()  # the next status tick notices; a daemon that never stops hangs into pytest-timeout
    finally:
        daemon.stop()
    assert code == EXIT_FATAL
    lines = [line for line in daemon.stderr().splitlines() if line.startswith("teleton stopped:")]
    assert len(lines) == 1, daemon.stderr()[-3000:]
    assert f"the database {db} was {how} while the daemon ran; stopping (exit 78)" in lines[0]
    assert "teleton restore" in lines[0] and "Traceback" not in daemon.stderr()
    assert (state / MARKER).exists()


def _restart_tells_the_owner_once(root: Path, config: Path) -> tuple[list[str], list[str]]:
    """Start again: the owner's notice, the marker gone, a new message answered. What the owner was sent, and
    the owner's messages in the database the new run used."""
    state = root / "state"
    daemon = Daemon(root, config).start()
    try:
        daemon.wait_for(lambda _: any(NOTICE in e["text"] for e in daemon.sent(OWNER["id"])))
        until_sync(lambda: not (state / MARKER).exists())
        _answered(daemon, "after the restart", 2)
    finally:
        daemon.stop()
    conn = connect(state / "teleton.db", pick_driver(), vectors=False)
    try:
        kept = [r[0] for r in conn.execute("select text from tg_messages where is_outgoing = 0 order by id")]
    finally:
        conn.close()
    return [e["text"] for e in daemon.sent(OWNER["id"])], kept


def test_a_deleted_database_stops_the_daemon_and_the_next_start_tells_the_owner(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    config = write_config(daemon_root, pong_api.base_url)
    _lose_database(daemon_root, config, "delete", "deleted")
    status = _cli(daemon_root, config, "status")
    assert status.returncode == 1 and "not running" in status.stdout
    assert "was deleted while the daemon ran" in status.stdout, status.stdout
    doctor = [line for line in _cli(daemon_root, config, "doctor").stdout.splitlines() if "Last stop" in line]
    assert len(doctor) == 1 and "FAIL" in doctor[0] and "was deleted while the daemon ran" in doctor[0], doctor

    sent, kept = _restart_tells_the_owner_once(daemon_root, config)
    notices = [t for t in sent if NOTICE in t]
    assert len(notices) == 1 and notices[0].startswith("Last run stopped at "), sent
    assert sent.index(notices[0]) == 0  # told first, before anything of the new run
    assert kept == ["after the restart"]  # a fresh database: what the deleted file held is gone


def test_a_database_replaced_while_running_stops_the_daemon_and_the_copy_serves_next(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    config = write_config(daemon_root, pong_api.base_url)
    _lose_database(daemon_root, config, "replace", "replaced")
    assert "was replaced while the daemon ran" in _cli(daemon_root, config, "status").stdout

    sent, kept = _restart_tells_the_owner_once(daemon_root, config)
    assert sum(NOTICE in t for t in sent) == 1 and NOTICE in sent[0]
    assert kept == ["before the loss", "after the restart"]  # the copy put in its place serves the new run


async def test_writes_and_checkpoints_keep_the_identity_and_only_the_main_file_counts(tmp_path: Path) -> None:
    path = tmp_path / "teleton.db"
    db = await Database.open(path)
    watch = await DatabaseWatch.opened(db.path)
    try:
        for i in range(3):
            await db.execute("insert into tg_messages(chat_id, message_id, date, text) values (1, ?, 0, 'm')", (i,))
            await db.checkpoint()  # truncates the WAL: the -wal file changes, the database does not
            assert await watch.check() is None
        for side in ("-wal", "-shm"):
            await asyncio.to_thread(path.with_name(path.name + side).unlink, missing_ok=True)
        assert await watch.check() is None
        await asyncio.to_thread(path.unlink)
        lost = await watch.check()
        assert lost is not None and lost.how == "deleted" and lost.path == str(path)
    finally:
        await db.close()
