"""Scheduled work keeps the clearance and principal of the turn that created it, exactly (docs/privacy.md): a task
made in a group is a group turn when it runs, a task made by a task inherits, a sender-less message gives
no admin rights; quotas and a minimum repeat interval hold for everyone but the owner; scheduled turns pass
the rate limiter."""

from __future__ import annotations

import json
import time
from pathlib import Path

from teleton.gateway.contract import UserInfo
from teleton.scheduler.scheduler import Scheduler, SchedulerSettings
from teleton.storage import Database
from teleton.tools.families.memory import memory_tools
from teleton.tools.families.tasks import TaskLimits, task_tools
from teleton.tools.families.workspace import workspace_tools
from teleton.tools.registry import ToolRegistry
from tests.agent.conftest import ALICE, GROUP, OWNER, AgentHarness, build_harness
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, body_text, text, tool_results, tool_use, user_said
from tests.waiting import until

SECRET = "SECRET-LOCKER-4711"


def directive_model(body: Body) -> Reply:
    """Calls every `CALL name {json}` line of the latest user text; then repeats what the tools returned."""
    if tool_results(body):
        return text("RESULTS: " + " | ".join(str(r.get("content")) for r in tool_results(body)))
    calls = []
    for line in user_said(body).splitlines():
        if "CALL " in line:
            name, _, args = line.split("CALL ", 1)[1].partition(" ")
            calls.append((name, json.loads(args or "{}")))
    return tool_use(*calls) if calls else text("nothing to do")


async def _wired(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic, limits: TaskLimits
) -> tuple[AgentHarness, Scheduler]:
    h = await build_harness(tmp_path, db, fake_api)
    h.main = directive_model
    (h.workspace / "MEMORY.md").write_text(f"The locker code is {SECRET}.")
    registry = ToolRegistry([*memory_tools(), *workspace_tools(), *task_tools(limits)])
    h.agent.deps.registry = registry
    scheduler = Scheduler(
        db,
        run_agent_turn=h.agent.scheduled.run_task,
        registry=registry,
        context_for=h.agent.scheduled.task_context,
        settings=SchedulerSettings(max_sleep_s=0.1),
    )
    h.agent.tool_deps.scheduler = scheduler  # the harness's agent exists first; the daemon builds it second
    return h, scheduler


async def _tasks(db: Database) -> list:
    return await db.fetchall("select id, chat_id, status, clearance, principal_id, principal_admin, result from tasks")


async def test_a_task_from_a_group_runs_as_that_group(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> None:
    h, scheduler = await _wired(tmp_path, db, fake_api, TaskLimits())
    nested = 'CALL memory_read {"target": "memory"}\nCALL workspace_read {"path": "MEMORY.md"}'
    # A task the reminder makes: at once (refused: a chain of tasks is a repeat in disguise), and later.
    prompt = "\n".join(
        f'CALL schedule_task {{"description": "{name}", "delay_minutes": {delay}, "prompt": {json.dumps(nested)}}}'
        for name, delay in (("nested now", 0), ("nested later", 61))
    )
    plan = {"description": "reminder", "delay_minutes": 0, "prompt": prompt}
    tool_task = {"description": "read it", "delay_minutes": 0, "tool": "workspace_read",
                 "tool_input": {"path": "MEMORY.md"}}  # fmt: skip
    # Alice (no admin) in the group, and a sender-less message there (a channel post, say).
    await h.group(f"CALL schedule_task {json.dumps(plan)}\nCALL schedule_task {json.dumps(tool_task)}")
    sender_less = h.message(
        GROUP, None, 'CALL schedule_task {"description": "anon", "delay_minutes": 0}', mentions_us=True
    )  # type: ignore[arg-type]
    await h.archive(sender_less)
    await h.agent.handle(sender_less)
    start = len(fake_api.requests)
    await scheduler.start()
    try:
        await until(lambda: _finished_but(db, "nested later"))
        refusals = [str(r["content"]) for b in fake_api.requests[start:] for r in tool_results(b)]
        assert any("must wait at least 60 minutes" in r for r in refusals)
        await db.execute("update tasks set run_at = 0 where description = 'nested later'")  # it is due now
        scheduler.wake()
        await until(lambda: _all_finished(db, 4))
    finally:
        await scheduler.stop()
    rows = await _tasks(db)
    assert len(rows) == 4  # the reminder, the tool task, the anonymous one and the task the reminder made
    for row in rows:
        assert row["chat_id"] == GROUP.id and row["clearance"] == f"chat:{GROUP.id}"
        assert row["principal_admin"] == 0
    principals = sorted((r["principal_id"] for r in rows), key=lambda p: p or 0)
    assert principals == [None, ALICE.id, ALICE.id, ALICE.id]  # the nested task inherited Alice
    tool_row = next(r for r in rows if r["result"] and "private" in r["result"])
    assert tool_row["status"] == "failed"  # the tool task was refused MEMORY.md at run time
    for body in fake_api.requests[start:]:  # every scheduled turn's request: nothing of the owner's
        assert SECRET not in body_text(body)
        assert "memory_read" not in {t["name"] for t in body.get("tools", [])}
    assert all(SECRET not in sent.text for sent in h.gateway.sent)
    await h.llm.close()


async def _finished_but(db: Database, description: str) -> bool:
    rows = await db.fetchall("select description, status from tasks")
    waiting = [r for r in rows if r["description"] == description and r["status"] == "pending"]
    return (
        len(rows) == 4
        and len(waiting) == 1
        and all(r["status"] in ("done", "failed") for r in rows if r not in waiting)
    )


async def _all_finished(db: Database, count: int) -> bool:
    rows = await db.fetchall("select status from tasks")
    return len(rows) >= count and all(r["status"] in ("done", "failed") for r in rows)


async def test_the_owners_task_runs_as_the_owner(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> None:
    h, scheduler = await _wired(tmp_path, db, fake_api, TaskLimits())
    await h.dm('CALL schedule_task {"description": "check", "delay_minutes": 0, "tool": "workspace_read", '
               '"tool_input": {"path": "MEMORY.md"}}')  # fmt: skip
    await scheduler.start()
    try:
        await until(lambda: _all_finished(db, 1))
    finally:
        await scheduler.stop()
    row = (await _tasks(db))[0]
    assert (row["clearance"], row["principal_id"], row["principal_admin"]) == ("owner", OWNER.id, 1)
    assert row["status"] == "done" and SECRET in row["result"]
    await h.llm.close()


async def test_quotas_and_repeat_interval_bind_everyone_but_the_owner(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    h, _ = await _wired(tmp_path, db, fake_api, TaskLimits(max_active_per_chat=2, max_active_per_user=1))
    every_5 = 'CALL schedule_task {"description": "spam", "cron": "*/5 * * * *"}'
    await h.group(every_5)
    refusal = str(tool_results(fake_api.requests[-1])[0]["content"])
    assert "at most every 60 minutes" in refusal
    hourly = 'CALL schedule_task {"description": "hourly", "cron": "0 * * * *"}'
    await h.group(hourly)  # Alice's first: fine
    await h.group(hourly)  # Alice's second: over her quota of 1
    assert "you already have 1 active tasks" in str(tool_results(fake_api.requests[-1])[0]["content"])
    mallory = UserInfo(id=6666, first_name="Mallory")
    await h.group(hourly, sender=mallory)  # the chat's second: fine
    await h.group(hourly, sender=UserInfo(id=7777, first_name="Eve"))  # the chat's third: over its quota
    assert "this chat already has 2 active tasks" in str(tool_results(fake_api.requests[-1])[0]["content"])
    for _ in range(3):  # the owner, in their own chat, is bound by neither
        await h.dm(every_5)
    counts = await db.fetchall("select clearance, count(*) n from tasks group by clearance order by clearance")
    assert [tuple(r) for r in counts] == [(f"chat:{GROUP.id}", 2), ("owner", 3)]
    await h.llm.close()


async def test_a_rate_limited_scheduled_turn_waits_without_counting(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    h, scheduler = await _wired(tmp_path, db, fake_api, TaskLimits())
    checks: list[tuple[int, int | None]] = []

    def limited(chat_id: int, principal_id: int | None) -> str:
        checks.append((chat_id, principal_id))
        return "per-chat rate limit"

    h.agent.deps.rate_check = limited
    await h.group('CALL schedule_task {"description": "later", "delay_minutes": 0}')
    requests = len(fake_api.requests)
    await scheduler.start()
    try:
        await until(lambda: _has_result(db, "waiting: per-chat rate limit"))
    finally:
        await scheduler.stop()
    row = await db.fetchone("select status, attempts, run_at from tasks")
    assert row["status"] == "pending" and row["attempts"] == 0 and row["run_at"] > time.time() + 30
    assert checks == [(GROUP.id, ALICE.id)] and len(fake_api.requests) == requests  # the model was not called
    await h.llm.close()


async def _has_result(db: Database, text_: str) -> bool:
    row = await db.fetchone("select result from tasks")
    return row is not None and row["result"] == text_
