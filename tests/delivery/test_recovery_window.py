"""After a restart, a message owed an answer is answered once if it is younger than
``telegram.recovery_window_minutes``; an older one is failed with the reason, never answered late, and is
counted in the log and in ``teleton status`` (docs/operations.md).

The real daemon (loopback transport) starts on an archive a crash left behind: two accepted messages of the
owner's DM, one from an hour ago and one from a minute ago."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from teleton.agent.stages.answering import UNAVAILABLE as APOLOGY
from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.memory.feed import archive as fa
from teleton.memory.feed import message_life as life
from teleton.storage import Database
from teleton.telegram.receive.recovery import CUT_WHILE_SENDING, TOO_OLD
from tests.daemon.harness import OWNER, Daemon, write_config
from tests.delivery.support import archive_accepted
from tests.fakes.anthropic_server import FakeAnthropic, text, user_said
from tests.waiting import until_sync

pytestmark = pytest.mark.costly


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
            daemon.wait_for(lambda ev: len(daemon.sent(OWNER["id"])) == 1)

            def counted() -> bool:
                daemon.pump()
                try:
                    status = json.loads((daemon_root / "state" / "status.json").read_text())
                except (OSError, ValueError):
                    return False
                return status.get("messages", {}).get("failed") == 1

            until_sync(counted)  # rewritten every few seconds
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


async def _cut_while_sending(db_path: Path, now: float) -> None:
    """Three turns killed after `sending` was written: one whose answer went out, one whose apology for a
    failed model call went out, one whose reply never left."""
    db = await Database.open(db_path)
    chat = ChatInfo(id=OWNER["id"], type="dm")
    sender = UserInfo(OWNER["id"], OWNER["first_name"])
    try:
        for message_id, failure, went_out in [(1, None, "the answer"), (2, "model unavailable: 529", APOLOGY),
                                               (3, None, None)]:  # fmt: skip
            since = now - 60 + 10 * message_id
            await archive_accepted(db, IncomingMessage(chat, sender, message_id, f"question {message_id}", date=since))
            note = fa.sending_note(since, failure)
            await db.write(lambda c, m=message_id, n=note: life.move(c, chat.id, [m], life.STATE_SENDING, n))
            if went_out:
                record = fa.MessageRecord(chat_id=chat.id, message_id=100 + message_id, date=since + 1,
                                          text=went_out, sender_id=0, is_outgoing=True)  # fmt: skip
                await db.write(lambda c, r=record: fa.insert_message(c, r, agent_state=life.STATE_HISTORY))
    finally:
        await db.close()


def test_a_crash_after_an_apology_went_out_leaves_the_message_failed_not_answered(daemon_root: Path) -> None:
    db_path = daemon_root / "state" / "teleton.db"
    db_path.parent.mkdir(parents=True)
    asyncio.run(_cut_while_sending(db_path, time.time()))
    with FakeAnthropic() as api:
        config = write_config(daemon_root, api.base_url, **{"embedding.provider": "none", "tool_rag.enabled": False})
        daemon = Daemon(daemon_root, config).start()
        try:
            until_sync(lambda: _states(db_path)[3][0] != "sending")
        finally:
            daemon.stop()
        assert not api.requests  # nothing is answered again: each one's reply went out, or it failed
    assert _states(db_path) == {
        1: ("answered", None),
        2: ("failed", "model unavailable: 529"),
        3: ("failed", CUT_WHILE_SENDING),
    }
    assert daemon.sent() == []
