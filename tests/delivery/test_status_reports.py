"""`teleton status` shows what the daemon cannot do (docs/operations.md): a model outage, failing archive writes, and
the messages still owed an answer.

The model outage through the real daemon (loopback transport, the Messages API answering 500 to a DM turn)
and the real CLI; the storage error in-process: the real ArchiveBatcher whose COMMIT fails (a deferred foreign
key, checked at COMMIT as a full disk would fail it), gathered by the daemon's own ``gather_status``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from teleton.config import load_config
from teleton.daemon.health import gather_status
from teleton.daemon.runner import Daemon
from teleton.daemon.status_file import describe, read_status, write_status
from teleton.memory.feed import archive as fa
from teleton.storage import Database, quarantine
from teleton.telegram.gateway import TelegramGateway
from teleton.telegram.receive.archiver import ArchiveBatcher
from tests.daemon.harness import OWNER, write_config
from tests.daemon.harness import Daemon as DaemonProcess
from tests.delivery.support import BOUND_S, Gate
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, error, text, user_said
from tests.telegram.conftest import RecordingClient
from tests.waiting import until, until_sync

pytestmark = pytest.mark.costly

GROUP = {"id": -4242, "type": "group", "title": "Garden club"}


def _status_json(root: Path) -> dict[str, Any]:
    try:
        return json.loads((root / "state" / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _cli_status(root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    env["HOME"] = str(root / "home")
    return subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(config), "status"],
        capture_output=True, text=True, env=env, timeout=BOUND_S,
    )  # fmt: skip


def test_status_shows_a_model_outage_and_the_messages_waiting(daemon_root: Path) -> None:
    gate = Gate()

    def model(body: Body) -> Reply:
        if "group question" in user_said(body):
            gate.hold()  # this chat's turn is still waiting for the model: its message is owed an answer
            return text("late answer")
        return error(500, "api_error", "Internal server error")  # the outage, for everything else

    with FakeAnthropic() as api:
        api.responder = model
        config = write_config(
            daemon_root, api.base_url,
            **{"embedding.provider": "none", "tool_rag.enabled": False, "agent.max_retries": 1,
               "agent.retry_max_delay_s": 0.05, "agent.request_timeout_s": BOUND_S, "logging.level": "warning"},
        )  # fmt: skip
        daemon = DaemonProcess(daemon_root, config).start()
        try:
            daemon.send({"id": OWNER["id"], "type": "dm", "title": ""}, "hello, are you there?", message_id=1)
            daemon.wait_for(lambda ev: any(e["op"] == "send_message" for e in ev))
            daemon.send(GROUP, "@teleton_agent group question", message_id=1, sender={"id": 7, "first_name": "Ann"},
                        mentions_us=True)  # fmt: skip
            until_sync(gate.entered.is_set)

            def reported() -> bool:
                daemon.pump()
                status = _status_json(daemon_root)
                messages = status.get("messages", {})
                return (
                    "model" in status.get("errors", {})
                    and messages.get("failed") == 1
                    and (messages.get("accepted", 0) + messages.get("sending", 0) == 1)
                )

            until_sync(reported)  # rewritten every few seconds
            proc = _cli_status(daemon_root, config)
        finally:
            gate.open()
            daemon.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "last model error" in proc.stdout and "Internal server error" in proc.stdout, proc.stdout
    assert "messages: 1 waiting for an answer, 1 failed" in proc.stdout, proc.stdout
    assert "Sorry" in daemon.sent(OWNER["id"])[0]["text"]  # the user was told, not left hanging


def _commit_fails_until_task_77_exists(conn: Any) -> None:
    conn.execute("pragma defer_foreign_keys = on")
    conn.execute("insert into tasks(id, description, kind, created_at, updated_at) values (10, 'x', 'agent', 0, 0)")
    conn.execute("insert into task_dependencies(task_id, depends_on) values (10, 77)")


async def test_status_shows_a_storage_error_and_counts_unanswered_and_quarantined_items(
    tmp_path: Path, isolated_home: Path, db: Database
) -> None:
    for message_id, state in enumerate(["accepted", "archived", "sending", "failed", "answered", "ignored"], 1):
        record = fa.MessageRecord(chat_id=5, message_id=message_id, date=time.time(), text=f"m{message_id}")
        await db.write(lambda c, r=record, s=state: fa.insert_message(c, r, agent_state=s))
    await db.write(lambda c: quarantine.put(c, "embedding", 4, "ValueError: input rejected"))  # a poison row
    daemon = Daemon(load_config(write_config(tmp_path, "http://127.0.0.1:9")))
    daemon.db = db
    batcher = ArchiveBatcher(db, retry_max_s=0.05)
    daemon.gateway = TelegramGateway(RecordingClient(), db, batcher=batcher)
    stuck = await batcher.put(_commit_fails_until_task_77_exists)
    try:
        await until(lambda: batcher.failing_since is not None)
        await gather_status(daemon)
        write_status(tmp_path / "status.json", daemon.status)
        running, shown = describe(read_status(tmp_path / "status.json"))
    finally:
        await db.execute(
            "insert into tasks(id, description, kind, created_at, updated_at) values (77, 'y', 'agent', 0, 0)"
        )
        await stuck
        await batcher.close()
    assert running, shown
    assert "last storage error" in shown, shown
    assert "messages: 3 waiting for an answer, 1 failed" in shown, shown
    assert "queues: archive" in shown, shown
    assert "quarantined: 1 embedding" in shown, shown
