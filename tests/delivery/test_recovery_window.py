"""After a restart, a message owed an answer is answered once if it is younger than
``telegram.recovery_window_minutes``; an older one is failed with the reason, never answered late, and is
counted in the log and in ``teleton status`` (DESIGN §11).

The real daemon (loopback transport) starts on an archive a crash left behind: two accepted messages of the
owner's DM, one from an hour ago and one from a minute ago."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.storage import Database
from teleton.telegram.recovery import TOO_OLD
from tests.daemon.harness import OWNER, Daemon, write_config
from tests.delivery.support import BOUND_S, archive_accepted, until_sync
from tests.fakes.anthropic_server import FakeAnthropic, text, user_said


async def _left_by_a_crash(db_path: Path, now: float) -> None:
    db = await Database.open(db_path)
    try:
        for message_id, age_s, said in [(1, 3600, "the hour-old question"), (2, 60, "the recent question")]:
            sender = UserInfo(OWNER["id"], OWNER["first_name"])
            chat = ChatInfo(id=OWNER["id"], type="dm")
            await archive_accepted(db, IncomingMessage(chat, sender, message_id, said, date=now - age_s))
    finally:
        await db.close()


def _states(db_path: Path) -> dict[int, tuple[str, str | None]]:
    async def read() -> dict[int, tuple[str, str | None]]:
        db = await Database.open(db_path)
        try:
            rows = await db.fetchall(
                "select message_id, agent_state, agent_note from tg_messages where is_outgoing = 0"
            )
        finally:
            await db.close()
        return {int(r[0]): (r[1], r[2]) for r in rows}

    return asyncio.run(read())


def test_a_recent_message_is_answered_and_an_old_one_failed_counted_in_log_and_status(daemon_root: Path) -> None:
    db_path = daemon_root / "state" / "teleton.db"
    db_path.parent.mkdir(parents=True)
    asyncio.run(_left_by_a_crash(db_path, time.time()))
    with FakeAnthropic() as api:
        api.responder = lambda body: text("answer to " + user_said(body))
        config = write_config(
            daemon_root, api.base_url,
            **{"telegram.recovery_window_minutes": 30, "embedding.provider": "none", "tool_rag.enabled": False},
        )  # fmt: skip
        daemon = Daemon(daemon_root, config).start()
        try:
            daemon.wait_for(lambda ev: len(daemon.sent(OWNER["id"])) == 1, timeout=BOUND_S)

            def counted() -> bool:
                daemon.pump()
                try:
                    status = json.loads((daemon_root / "state" / "status.json").read_text())
                except (OSError, ValueError):
                    return False
                return status.get("messages", {}).get("failed") == 1

            until_sync(counted, "status.json to count the failed message")  # rewritten every few seconds
        finally:
            daemon.stop()
    assert [e["text"] for e in daemon.sent()] == ["answer to the recent question"]
    assert _states(db_path) == {1: ("failed", TOO_OLD), 2: ("answered", None)}
    recovered = [
        json.loads(line)
        for line in (daemon_root / "daemon.log").read_text().splitlines()
        if '"event": "messages_recovered"' in line
    ]
    assert [(r["too_old"], r["offered"]) for r in recovered] == [(1, 1)], recovered
