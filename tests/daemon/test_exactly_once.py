"""Exactly once through the real daemon, counted by what the chat RECEIVED (the loopback's stand-in for
Telegram's servers), never by what the database says.

- A reply the chat received just before a kill -9 (the window the database cannot see) is sent again
  after the restart with the same ``random_id``: the network refuses it as a duplicate, the chat holds it
  once, the model is not asked again, and the message ends answered.
- A long reply cut between its parts resumes from the first part not confirmed: each part arrives once.
- A full disk defers turns instead of dropping them: once space returns, every accepted message is
  answered, without a restart.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from teleton.daemon.status_file import STALE_AFTER_S, describe, free_space, read_status
from tests.daemon.harness import OWNER, Daemon, db_rows, write_config
from tests.fakes.anthropic_server import FakeAnthropic, text, user_said

pytestmark = pytest.mark.costly

OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}


@pytest.fixture
def api() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        server.responder = lambda body: text(f"pong: {user_said(body)[-40:]}")
        yield server


def _state(root: Path, message_id: int, chat_id: int = OWNER["id"]) -> str | None:
    rows = db_rows(
        root, "select agent_state from tg_messages where chat_id = ? and message_id = ? and is_outgoing = 0",
        (chat_id, message_id),
    )  # fmt: skip
    return rows[0][0] if rows else None


def _killed_after(root: Path, config: Path, received: int, send: tuple[str, int]) -> Daemon:
    daemon = Daemon(root, config)
    daemon.env["TELETON_LOOPBACK_DIE_AFTER"] = str(received)
    daemon.start()
    daemon.send(OWNER_DM, *send)
    assert daemon.wait() == -9  # killed itself right after the chat received its N-th message
    daemon.stop()
    return daemon


def _restart_until_answered(root: Path, config: Path, message_id: int) -> Daemon:
    daemon = Daemon(root, config).start()
    daemon.wait_for(lambda _events: _state(root, message_id) in ("answered", "failed"))
    return daemon


def test_a_reply_cut_after_the_chat_received_it_arrives_once(api: FakeAnthropic, daemon_root: Path) -> None:
    config = write_config(daemon_root, api.base_url)
    killed = _killed_after(daemon_root, config, 1, ("hello there", 1))
    assert [r["text"] for r in killed.received()] == ["pong: hello there"]
    assert _state(daemon_root, 1) == "sending"  # the database never learned that it went out

    daemon = _restart_until_answered(daemon_root, config, 1)
    try:
        assert _state(daemon_root, 1) == "answered"
        assert [r["text"] for r in daemon.received()] == ["pong: hello there"]  # once, not twice
        assert daemon.sent() == []  # nothing new went out after the restart
        assert len(api.requests) == 1  # the turn was not run again
        outgoing = db_rows(daemon_root, "select message_id, text from tg_messages where is_outgoing = 1")
        assert outgoing == [(daemon.received()[0]["message_id"], "pong: hello there")]  # archived, once
        assert db_rows(daemon_root, "select count(*) from reply_sends") == [(0,)]
    finally:
        daemon.stop()


def test_a_long_reply_cut_between_its_parts_resumes_where_it_stopped(api: FakeAnthropic, daemon_root: Path) -> None:
    paragraphs = [f"Paragraph {i}: " + ("word " * 700).strip() for i in range(3)]  # ~3,500 characters each
    api.responder = lambda body: text("\n\n".join(paragraphs))
    config = write_config(daemon_root, api.base_url)
    killed = _killed_after(daemon_root, config, 2, ("tell me a long story", 1))
    assert len(killed.received()) == 2

    daemon = _restart_until_answered(daemon_root, config, 1)
    try:
        got = [r["text"] for r in daemon.received()]
        assert len(got) == 3 and len(set(got)) == 3, [g[:20] for g in got]
        assert "".join(got).replace("\n", "") == "".join(paragraphs).replace("\n", "")  # every word, in order
        assert _state(daemon_root, 1) == "answered" and len(api.requests) == 1
    finally:
        daemon.stop()


@pytest.fixture
def small_disk(daemon_root: Path) -> Iterator[Path]:
    """The daemon's data directory on a 64 MB tmpfs (a full disk is a file that fills it)."""
    state = daemon_root / "state"
    state.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(state)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to simulate a full disk: {mounted.stderr.decode().strip()}")
    try:
        yield state
    finally:
        subprocess.run(["umount", "-l", str(state)], capture_output=True)


def _fill(disk: Path) -> Path:
    """Every free byte taken. The WAL is emptied first (a checkpoint from beside the daemon, retried while
    a reader holds it), or the daemon's next writes would reuse its frames and never meet the full disk."""
    while True:
        with contextlib.closing(sqlite3.connect(disk / "teleton.db", timeout=30)) as conn:
            if conn.execute("pragma wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                break
    filler = disk / "filler.bin"
    # Unbuffered: a buffered file would keep the last piece that did not fit and raise ENOSPC again on close.
    with open(filler, "wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    return filler


def test_after_a_full_disk_every_accepted_message_is_answered_without_a_restart(
    api: FakeAnthropic, daemon_root: Path, small_disk: Path
) -> None:
    gate = threading.Event()

    def answer(body: dict) -> object:
        gate.wait(60)  # the model answers only once the disk is full
        return text(f"pong: {user_said(body)}")

    api.responder = answer
    config = write_config(daemon_root, api.base_url, **{"agent.max_retries": 0})
    daemon = Daemon(daemon_root, config).start()
    try:
        for i in range(1, 6):
            daemon.send(OWNER_DM, f"question {i}", i)
        daemon.wait_for(lambda _events: len(daemon.acked()) == 5)  # all archived and accepted
        # Messages are accepted before the first status file is written (at ready): on a busy machine the disk
        # could fill in between, and there would be no status to read below.
        daemon.wait_for(lambda _events: (small_disk / "status.json").exists())
        filler = _fill(small_disk)
        gate.set()
        # The turns cannot write their records: they are deferred, not answered, not dropped.
        daemon.wait_for(lambda _events: "turn_deferred" in (daemon_root / "daemon.log").read_text())
        # Its status file cannot be rewritten either: `teleton status`, a minute on, says why.
        status = read_status(small_disk / "status.json")
        later = time.time() + 2 * STALE_AFTER_S
        _running, said = describe(status, now=later, free_bytes=free_space(small_disk))
        assert said.startswith("disk full: ") and "no restart needed" in said, said
        filler.unlink()
        daemon.wait_for(lambda _events: all(_state(daemon_root, i) == "answered" for i in range(1, 6)))
        texts = sorted(r["text"] for r in daemon.received())
        assert texts == sorted(f"pong: question {i}" for i in range(1, 6)), texts  # each once
        assert daemon.proc is not None and daemon.proc.poll() is None  # no restart was needed
    finally:
        daemon.stop()


def test_odd_input_is_one_error_event_and_the_connection_stays(api: FakeAnthropic, daemon_root: Path) -> None:
    """An id no Telegram message can have, and a null text: one error event for the first, an empty text
    for the second, and the same connection carries on."""
    daemon = Daemon(daemon_root, write_config(daemon_root, api.base_url)).start()
    try:
        daemon.send(OWNER_DM, "a huge id", 2**65)
        daemon.wait_for(lambda events: any(e["op"] == "error" for e in events))
        assert "out of range" in next(e for e in daemon.events if e["op"] == "error")["error"]
        daemon.send(OWNER_DM, None, 2)  # type: ignore[arg-type]
        daemon.send(OWNER_DM, "still there?", 3)
        daemon.wait_for(lambda _events: _state(daemon_root, 3) == "answered")
        texts = db_rows(daemon_root, "select message_id, text from tg_messages where is_outgoing = 0")
        assert sorted(texts) == [(2, ""), (3, "still there?")]
        assert daemon.socket_error is None
    finally:
        daemon.stop()
