"""Backups of the real daemon: made while it ingests, restored after a kill -9, scheduled on its own, a
failing target told to the owner while it keeps answering; and `teleton chat` stopping on a lost database."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from teleton.daemon.database_watch import MARKER
from tests.daemon.harness import OWNER, Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.waiting import until_sync

pytestmark = pytest.mark.costly

OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
GROUP = {"id": -4200, "type": "group", "title": "busy group"}
MEMBER = {"id": 5151, "first_name": "Mia", "username": "mia"}


def _cli(root: Path, config: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    env.update(HOME=str(root / "home"), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(config), *args],
        capture_output=True, text=True, env=env, timeout=300, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def _sql(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _answered(daemon: Daemon, message: str, message_id: int) -> None:
    daemon.send(OWNER_DM, message, message_id=message_id)
    daemon.wait_for(lambda _: any(message in e["text"] for e in daemon.sent(OWNER["id"])))


def test_a_backup_made_while_the_daemon_ingests_restores_after_a_kill_and_the_daemon_answers(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    config = write_config(daemon_root, pong_api.base_url, **{"embedding.provider": "none"})
    state = daemon_root / "state"
    db, archive = state / "teleton.db", daemon_root / "live.tar.gz"
    daemon = Daemon(daemon_root, config).start()
    ingesting = threading.Event()
    try:
        for n in range(1, 4):
            _answered(daemon, f"remember the harbour {n}", n)
        conn = sqlite3.connect(db, timeout=30)  # a fact, written beside the daemon
        conn.execute(
            "insert into facts(category, key, value, scope, hash, created_at, updated_at) "
            "values ('general', 'boat', 'the owner sails a blue boat', 'owner', 'f1', 0, 0)"
        )
        conn.commit()
        conn.close()
        memory = state / "workspace" / "MEMORY.md"
        memory.write_text(memory.read_text() + "\nThe lighthouse keeper is called Ada.\n")

        def ingest() -> None:  # a group that talks without addressing the agent: archived, not answered
            n = 1000
            while not ingesting.is_set():
                daemon.send(GROUP, f"chatter {n}", message_id=n, sender=MEMBER)
                n += 1
                time.sleep(0.005)

        sender = threading.Thread(target=ingest)
        sender.start()
        until_sync(lambda: _sql(db, "select count(*) from tg_messages where chat_id = -4200")[0][0] >= 50)
        before = _sql(db, "select count(*) from tg_messages")[0][0]
        refused = _cli(daemon_root, config, "restore", str(daemon_root / "none.tar.gz"))
        made = _cli(daemon_root, config, "backup", str(archive))
        after = _sql(db, "select count(*) from tg_messages")[0][0]
        ingesting.set()
        sender.join()
        assert made.returncode == 0, made.stderr
        assert after > before  # the daemon kept archiving while the backup ran
        assert refused.returncode == 1 and "is using" in refused.stderr  # never restored under a running daemon
        running = _cli(daemon_root, config, "restore", str(archive))
        assert running.returncode == 1 and "is using" in running.stderr
        assert daemon.proc is not None
        daemon.proc.kill()  # kill -9
        daemon.proc.wait()
    finally:
        ingesting.set()
        daemon.stop()

    restored = _cli(daemon_root, config, "restore", str(archive))
    assert restored.returncode == 0, restored.stderr
    count = _sql(db, "select count(*) from tg_messages")[0][0]
    assert before <= count <= after  # everything committed before the backup began; no more than was there
    assert _sql(db, "pragma integrity_check") == [("ok",)]
    fts = _sql(db, "select count(*) from tg_messages_fts")[0][0]
    assert fts == count  # each message whole: row and keyword index together
    ids = [r[0] for r in _sql(db, "select message_id from tg_messages where chat_id = -4200 order by message_id")]
    assert ids == list(range(1000, 1000 + len(ids)))  # a prefix of what was sent: nothing from after, no gaps
    assert _sql(db, "select value from facts") == [("the owner sails a blue boat",)]
    assert "The lighthouse keeper is called Ada." in (state / "workspace" / "MEMORY.md").read_text()
    assert "OK   Database" in _cli(daemon_root, config, "doctor").stdout

    daemon = Daemon(daemon_root, config).start()
    try:
        _answered(daemon, "after the restore", 50_000)
    finally:
        daemon.stop()
    assert daemon.wait() == 0


def test_a_scheduled_backup_runs_at_start_and_status_shows_it(pong_api: FakeAnthropic, daemon_root: Path) -> None:
    folder = daemon_root / "archives"
    config = write_config(
        daemon_root, pong_api.base_url,
        **{"embedding.provider": "none", "backup.every": "daily", "backup.dir": str(folder)},
    )  # fmt: skip
    daemon = Daemon(daemon_root, config).start()
    try:
        _answered(daemon, "hello", 1)
        until_sync(lambda: (daemon_root / "state" / "last-backup.json").exists())
        archives = list(folder.glob("teleton-*.tar.gz"))
        assert len(archives) == 1 and archives[0].stat().st_mode & 0o777 == 0o600
        status = _cli(daemon_root, config, "status")
        assert "last backup:" in status.stdout and "verified" in status.stdout and str(archives[0]) in status.stdout
        assert _cli(daemon_root, config, "backup", "verify", str(archives[0])).returncode == 0
        _answered(daemon, "still here", 2)
    finally:
        daemon.stop()
    assert list(folder.glob("teleton-*.tar.gz")) == archives  # not due again the same day


def test_a_failing_backup_target_warns_the_owner_once_and_the_daemon_keeps_answering(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    blocker = daemon_root / "not-a-folder"
    blocker.write_text("a file where the backup folder should be")
    config = write_config(
        daemon_root, pong_api.base_url,
        **{"embedding.provider": "none", "backup.every": "hourly", "backup.dir": str(blocker / "backups")},
    )  # fmt: skip
    daemon = Daemon(daemon_root, config).start()
    try:
        daemon.wait_for(lambda _: any("Scheduled backup failed" in e["text"] for e in daemon.sent(OWNER["id"])))
        _answered(daemon, "are you still up", 1)
        status = _cli(daemon_root, config, "status")
        assert status.returncode == 0 and "last backup: FAILED" in status.stdout and "Not a directory" in status.stdout
    finally:
        daemon.stop()
    warnings = [e for e in daemon.sent(OWNER["id"]) if "Scheduled backup failed" in e["text"]]
    assert len(warnings) == 1 and "Not a directory" in warnings[0]["text"]
    assert daemon.wait() == 0


def test_chat_stops_when_its_database_is_deleted_and_the_next_start_says_so(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    config = write_config(daemon_root, pong_api.base_url, **{"embedding.provider": "none"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    env.update(HOME=str(daemon_root / "home"), COLUMNS="200")
    chat = subprocess.Popen(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(config), "chat"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert chat.stdin is not None and chat.stdout is not None
    chat.stdin.write("first message\n")
    chat.stdin.flush()
    while "pong: first message" not in chat.stdout.readline():
        pass
    refused = _cli(daemon_root, config, "restore", str(daemon_root / "any.tar.gz"))
    assert refused.returncode == 1 and "is using" in refused.stderr  # chat holds the data directory too
    (daemon_root / "state" / "teleton.db").unlink()
    out, err = chat.communicate("second message\nthird message\n", timeout=120)
    assert chat.returncode == 78, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "was deleted while `teleton chat` ran; stopping (exit 78)" in lines[0], err
    assert "pong: second" not in out and "pong: third" not in out
    assert (daemon_root / "state" / MARKER).exists()
    doctor = _cli(daemon_root, config, "doctor").stdout
    assert "was deleted while `teleton chat` ran" in doctor
    again = _cli(daemon_root, config, "chat", input="hello again\n")
    assert again.returncode == 0 and "Last run stopped at" in again.stdout and "pong: hello again" in again.stdout
    assert not (daemon_root / "state" / MARKER).exists()


def test_an_archive_without_embeddings_has_them_rebuilt_after_the_restore(
    pong_api: FakeAnthropic, daemon_root: Path
) -> None:
    config = write_config(daemon_root, pong_api.base_url)  # the default local embedding model
    db, archive = daemon_root / "state" / "teleton.db", daemon_root / "lean.tar.gz"
    embedded = "select count(*) from tg_messages m join tg_messages_vec16 v on v.id = m.id"
    pending = "select count(*) from tg_messages where embedded = 0"
    daemon = Daemon(daemon_root, config).start()
    try:
        for n in range(1, 6):
            _answered(daemon, f"the island ferry leaves at {n}", n)
        until_sync(lambda: _sql(db, pending) == [(0,)])
    finally:
        daemon.stop()
    messages = _sql(db, embedded)[0][0]
    knowledge = _sql(db, "select count(*) from knowledge where embedded = 1")[0][0]
    assert messages >= 5 and knowledge > 0
    made = _cli(daemon_root, config, "backup", "--no-vectors", str(archive))
    assert made.returncode == 0 and "embeddings left out: they are rebuilt after a restore" in made.stdout

    restored = _cli(daemon_root, config, "restore", str(archive))
    assert restored.returncode == 0 and "the next start rebuilds them in the background" in restored.stdout
    assert _sql(db, "select count(*) from sqlite_master where name in ('tg_messages_vec16', 'knowledge_vec')") == [(0,)]
    assert _sql(db, "select count(*) from tg_messages where embedded = 1") == [(0,)]
    assert _sql(db, pending)[0][0] >= messages
    daemon = Daemon(daemon_root, config).start()
    try:
        until_sync(lambda: _sql(db, embedded)[0][0] == messages)  # every message found by meaning again
        # Every knowledge chunk embedded again. Not an equal count: the daily log the daemon writes as it stops
        # and starts is knowledge too, so its chunks can differ from the first run's.
        until_sync(lambda: _sql(db, "select count(*) from knowledge where embedded = 0") == [(0,)])
        assert _sql(db, "select count(*) from knowledge where embedded = 1")[0][0] >= knowledge
        _answered(daemon, "after the rebuild", 100)
    finally:
        daemon.stop()
