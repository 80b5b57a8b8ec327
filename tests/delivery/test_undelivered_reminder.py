"""A reminder whose reply cannot reach its chat fails visibly (docs/operations.md): each try that Telegram refuses is
counted and retried later, and after DELIVERY_ATTEMPTS tries the task is failed and the owner is told.

Real parts: the agent and the Scheduler on a real database, the real TelegramGateway on an unconnected
Telethon client; Telegram refuses every send to the group (ChatWriteForbidden), the edge is the only fake.
Retries are brought forward by moving run_at in the database, never by sleeping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from telethon import errors, functions, types

from teleton.agent.runtime import Agent, AgentDeps, AgentSettings
from teleton.llm import LLMClient
from teleton.memory.facts.store import FactStore
from teleton.privacy import Principals
from teleton.scheduler import task_store
from teleton.scheduler.scheduler import DELIVERY_ATTEMPTS, DELIVERY_RETRY_S, Scheduler
from teleton.scheduler.task_store import NewTask
from teleton.storage import Database
from teleton.tools.families.memory import memory_tools
from teleton.tools.registry import ToolRegistry
from tests.agent.conftest import llm_settings
from tests.fakes.anthropic_server import FakeAnthropic, text
from tests.telegram.conftest import ALICE, GROUP, make_harness

OWNER_ID = ALICE.id  # the owner's DM is reachable; the group refuses our messages
GROUP_ID = -GROUP.id
REMINDER = "Reminder: the book club meets tonight."


def _refuse_the_group(request: Any) -> BaseException | None:
    if isinstance(request, functions.messages.SendMessageRequest) and isinstance(request.peer, types.InputPeerChat):
        return errors.ChatWriteForbiddenError(request=request)
    return None


def _to(sent: list[Any], peer_type: type) -> list[str]:
    return [r.message for r in sent if isinstance(r.peer, peer_type)]


async def test_an_undeliverable_reminder_is_retried_then_failed_and_the_owner_told(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    tg = await make_harness(db)
    tg.client.fail_when = _refuse_the_group
    fake_api.responder = lambda body: text(REMINDER)
    llm = LLMClient(llm_settings(), api_key="test", base_url=fake_api.base_url)
    (tmp_path / "workspace").mkdir()
    agent = Agent(
        AgentDeps(
            db=db, llm=llm, gateway=tg.gateway, registry=ToolRegistry(memory_tools()), workspace=tmp_path / "workspace",
            facts=FactStore(db), principals=Principals(owner_id=OWNER_ID),
        ),
        AgentSettings(session_reset_hour=None, session_idle_minutes=None),
    )  # fmt: skip

    async def tell_owner(notice: str) -> None:  # what the daemon does (Daemon._tell_owner)
        await tg.gateway.send_message(OWNER_ID, notice)

    scheduler = Scheduler(db, run_agent_turn=agent.scheduled.run_task, tell_owner=tell_owner)
    task = await db.write(
        lambda c: task_store.insert_task(
            c, NewTask("book club reminder", "agent", {"prompt": "Remind the group of tonight's meeting."},
                       run_at=0, chat_id=GROUP_ID, clearance=f"chat:{GROUP_ID}", principal_id=OWNER_ID),
        )
    )  # fmt: skip
    try:
        for attempt in range(1, DELIVERY_ATTEMPTS + 1):
            assert await scheduler.run_due() == [task.id], f"try {attempt} did not start"
            await scheduler.wait_idle()
            row = await db.fetchone(
                "select status, attempts, result, run_at, updated_at, delivered_at from tasks where id = ?", (task.id,)
            )
            assert row["attempts"] == attempt and row["delivered_at"] is None
            if attempt < DELIVERY_ATTEMPTS:
                assert row["status"] == "pending", dict(row)
                assert row["result"].startswith(f"reply not delivered (try {attempt} of {DELIVERY_ATTEMPTS})"), row[2]
                # The waits grow as DELIVERY_RETRY_S says: 30 s after the first try, then 2, 10, 30 minutes.
                assert row["run_at"] - row["updated_at"] == pytest.approx(DELIVERY_RETRY_S[attempt - 1])
                assert await scheduler.run_due() == []  # it waits for its retry time ...
                await db.execute("update tasks set run_at = 0 where id = ?", (task.id,))  # ... which has come
        await tg.gateway.pipeline.settle()
    finally:
        await scheduler.stop()
        await tg.gateway.stop(grace_s=1)
        await llm.close()
    assert row["status"] == "failed", dict(row)
    assert row["result"].startswith(f"reply not delivered after {DELIVERY_ATTEMPTS} tries"), row["result"]
    sent = tg.client.sent()
    assert _to(sent, types.InputPeerChat) == [REMINDER] * DELIVERY_ATTEMPTS  # one refused send per try
    notices = _to(sent, types.InputPeerUser)
    assert len(notices) == 1 and f"Scheduled task #{task.id}" in notices[0] and "failed" in notices[0], notices
    outgoing = await db.fetchall("select chat_id from tg_messages where is_outgoing = 1")
    assert [r[0] for r in outgoing] == [OWNER_ID]  # the notice is archived; nothing reached the group
