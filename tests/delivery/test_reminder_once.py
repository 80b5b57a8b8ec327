"""A reminder is delivered once across a crash (docs/operations.md): a task a crash left 'running' is settled at the
next start by its delivery record — sent already: done, never again; cut while sending: failed with a reason,
never again; cut before sending: run again once; cut twice: failed.

In-process: the real Scheduler and agent on a real database, with the rows a crash leaves behind. As a process:
the real daemon killed (-9) while a reminder's turn waits for the model, before and after its reply went out."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from teleton.scheduler import task_store
from teleton.scheduler.scheduler import Scheduler, SchedulerSettings
from teleton.scheduler.task_store import NewTask
from teleton.storage import Database
from tests.agent.conftest import OWNER, OWNER_DM, AgentHarness, build_harness
from tests.daemon.harness import OWNER as DAEMON_OWNER
from tests.daemon.harness import Daemon, db_rows, write_config
from tests.delivery.support import BOUND_S, Gate
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, tool_results, tool_use, user_said
from tests.waiting import until, until_sync

pytestmark = pytest.mark.costly

REMINDER = "Time to water the plants!"


def _reminder(chat_id: int, owner_id: int) -> NewTask:
    return NewTask(
        description="water the plants",
        kind="agent",
        payload={"prompt": "Remind the owner to water the plants."},
        run_at=time.time() - 1,
        chat_id=chat_id,
        clearance="owner",
        principal_id=owner_id,
        principal_admin=True,
    )


# -- in-process: the rows a crash leaves behind ------------------------------------------------------------


async def _left_running(db: Database, *, sending_at: float | None, interrupted: int = 0) -> int:
    task = await db.write(lambda c: task_store.insert_task(c, _reminder(OWNER_DM.id, OWNER.id)))
    await db.execute(
        "update tasks set status = 'running', attempts = 1, last_run_at = ?, sending_at = ?, interrupted = ? "
        "where id = ?",
        (time.time() - 5, sending_at, interrupted, task.id),
    )
    return task.id


async def _outgoing(db: Database, chat_id: int, text_: str, date: float) -> None:
    await db.execute(
        "insert into tg_messages(chat_id, message_id, sender_id, date, text, is_outgoing, agent_state) "
        "values (?, ?, 0, ?, ?, 1, 'history')",
        (chat_id, 900_001, date, text_),
    )


async def _task(db: Database, task_id: int) -> dict:
    row = await db.fetchone("select status, result, attempts, interrupted from tasks where id = ?", (task_id,))
    return dict(row)


async def _wired(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> tuple[AgentHarness, Scheduler, list[str]]:
    h = await build_harness(tmp_path, db, fake_api)
    h.main = lambda body: text(REMINDER)
    told: list[str] = []

    async def tell_owner(notice: str) -> None:
        told.append(notice)

    settings = SchedulerSettings(max_sleep_s=0.1)
    scheduler = Scheduler(db, run_agent_turn=h.agent.scheduled.run_task, settings=settings, tell_owner=tell_owner)
    return h, scheduler, told


@asynccontextmanager
async def _started(h: AgentHarness, scheduler: Scheduler) -> AsyncIterator[None]:
    """The scheduler started as at a restart (recovery first), stopped after the block."""
    await scheduler.start()
    try:
        yield
    finally:
        await scheduler.stop()
        await h.llm.close()


def _reminders_sent(h: AgentHarness) -> int:
    return sum(1 for m in h.gateway.sent if m.text == REMINDER)


async def test_a_reply_that_went_out_before_the_crash_is_done_and_never_sent_again(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    h, scheduler, _ = await _wired(tmp_path, db, fake_api)
    sending_at = time.time() - 3
    task_id = await _left_running(db, sending_at=sending_at)
    await _outgoing(db, OWNER_DM.id, REMINDER, sending_at + 0.5)  # our reply reached the chat, then the crash
    async with _started(h, scheduler):
        assert (await _task(db, task_id))["status"] == "done"
        assert await scheduler.run_due() == []  # nothing due: it is not run again
        await scheduler.wait_idle()
    assert (await _task(db, task_id))["result"] == "delivered (before a restart)"
    assert fake_api.requests == [] and _reminders_sent(h) == 0  # the agent was never called


async def test_a_reply_cut_while_sending_fails_with_a_reason_and_is_not_sent_again(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    h, scheduler, told = await _wired(tmp_path, db, fake_api)
    sending_at = time.time() - 3
    task_id = await _left_running(db, sending_at=sending_at)
    await _outgoing(db, OWNER_DM.id, "an older message of ours", sending_at - 60)  # before sending_at: not it
    async with _started(h, scheduler):
        assert await scheduler.run_due() == []
        await scheduler.wait_idle()
    row = await _task(db, task_id)
    assert row["status"] == "failed" and row["result"] == task_store.CUT_WHILE_SENDING
    assert fake_api.requests == [] and _reminders_sent(h) == 0
    # The owner hears of it like of any failed task, instead of a reminder silently never coming.
    assert told == [f"Scheduled task #{task_id} (water the plants) failed: {task_store.CUT_WHILE_SENDING}"]


async def test_a_task_cut_before_sending_runs_again_exactly_once(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    h, scheduler, _ = await _wired(tmp_path, db, fake_api)
    task_id = await _left_running(db, sending_at=None, interrupted=0)
    async with _started(h, scheduler):
        await until(lambda: _status_in(db, task_id, ("done", "failed")))
        await scheduler.wait_idle()
        assert await scheduler.run_due() == []
    row = await _task(db, task_id)
    assert row["status"] == "done" and row["attempts"] == 2, row
    assert _reminders_sent(h) == 1
    assert len(h.main_requests()) == 1
    delivered = await db.fetchone("select delivered_at from tasks where id = ?", (task_id,))
    assert delivered[0] is not None


async def test_a_task_cut_a_second_time_fails_instead_of_running_a_third_time(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    h, scheduler, _ = await _wired(tmp_path, db, fake_api)
    task_id = await _left_running(db, sending_at=None, interrupted=1)
    async with _started(h, scheduler):
        assert await scheduler.run_due() == []
        await scheduler.wait_idle()
    row = await _task(db, task_id)
    assert row["status"] == "failed" and row["result"] == task_store.INTERRUPTED_TWICE
    assert fake_api.requests == [] and _reminders_sent(h) == 0


async def _status_in(db: Database, task_id: int, states: tuple[str, ...]) -> bool:
    return (await _task(db, task_id))["status"] in states


# -- the real daemon, killed -9 mid-reminder ----------------------------------------------------------------


def _config(root: Path, api: FakeAnthropic) -> Path:
    return write_config(
        root, api.base_url,
        **{"embedding.provider": "none", "tool_rag.enabled": False, "logging.level": "warning",
           "agent.request_timeout_s": BOUND_S},
    )  # fmt: skip


def _schedule_reminder(root: Path) -> int:
    async def add() -> int:
        db = await Database.open(root / "state" / "teleton.db")
        try:
            reminder = _reminder(DAEMON_OWNER["id"], DAEMON_OWNER["id"])
            task = await db.write(lambda c: task_store.insert_task(c, reminder))
            return task.id
        finally:
            await db.close()

    return asyncio.run(add())


class ReminderModel:
    """The model for the reminder's turn. ``via_tool``: it sends the reminder with the send_message tool and
    its next request (after the tool result) stalls; otherwise its first request stalls, before any send.
    ``stall`` False: it answers at once."""

    def __init__(self, *, via_tool: bool) -> None:
        self.via_tool = via_tool
        self.stall = True
        self.gate = Gate()
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, body: Body) -> Reply:
        if "Scheduled task #" not in _all_user_text(body):
            return text("ok")  # anything else the daemon asks (consolidation, summaries)
        with self._lock:
            self.calls += 1
        if self.via_tool and not tool_results(body):
            return tool_use(("send_message", {"text": REMINDER}))
        if self.stall:
            self.gate.hold()
        return text("Done." if self.via_tool else REMINDER)


def _all_user_text(body: Body) -> str:
    return " ".join(str(m["content"]) for m in body.get("messages", []) if m["role"] == "user") + user_said(body)


def _kill_when_stalled(daemon: Daemon, model: ReminderModel) -> None:
    until_sync(model.gate.entered.is_set)
    daemon.signal(signal.SIGKILL)
    assert daemon.wait() == -signal.SIGKILL
    daemon.pump()
    daemon.stop()
    model.gate.open()  # let the fake server's thread go; its answer goes nowhere


def _sent_reminders(root: Path) -> int:
    return db_rows(root, "select count(*) from tg_messages where is_outgoing = 1 and text = ?", (REMINDER,))[0][0]


def _settle(root: Path, daemon: Daemon, task_id: int) -> tuple:
    def finished() -> bool:
        daemon.pump()
        return db_rows(root, "select status from tasks where id = ?", (task_id,))[0][0] in ("done", "failed")

    until_sync(finished)
    return db_rows(root, "select status, result, attempts from tasks where id = ?", (task_id,))[0]


def test_daemon_killed_before_the_reminder_went_out_sends_it_once_after_restart(daemon_root: Path) -> None:
    with FakeAnthropic() as api:
        model = ReminderModel(via_tool=False)
        api.responder = model
        config = _config(daemon_root, api)
        task_id = _schedule_reminder(daemon_root)
        first = Daemon(daemon_root, config).start()
        _kill_when_stalled(first, model)
        assert _sent_reminders(daemon_root) == 0
        left = db_rows(daemon_root, "select status, sending_at from tasks where id = ?", (task_id,))
        assert left == [("running", None)]  # cut before sending

        model.stall = False
        again = Daemon(daemon_root, config).start()
        try:
            status, result, attempts = _settle(daemon_root, again, task_id)
            again.wait_for(lambda _: any(e["text"] == REMINDER for e in again.sent()))
        finally:
            again.stop()
    assert (status, attempts) == ("done", 2), (status, result)
    assert _sent_reminders(daemon_root) == 1
    assert [e["text"] for e in first.sent() + again.sent()].count(REMINDER) == 1


def test_daemon_killed_after_the_reminder_went_out_never_sends_it_again(daemon_root: Path) -> None:
    with FakeAnthropic() as api:
        model = ReminderModel(via_tool=True)
        api.responder = model
        config = _config(daemon_root, api)
        task_id = _schedule_reminder(daemon_root)
        first = Daemon(daemon_root, config).start()
        _kill_when_stalled(first, model)  # the reminder went out through the tool; the turn had not ended
        assert _sent_reminders(daemon_root) == 1
        calls_before = model.calls

        model.stall = False
        again = Daemon(daemon_root, config).start()
        try:
            status, result, _ = _settle(daemon_root, again, task_id)
            again.pump()
        finally:
            again.stop()
    assert (status, result) == ("done", "delivered (before a restart)")
    assert model.calls == calls_before  # the turn was not run again
    assert _sent_reminders(daemon_root) == 1
    assert [e["text"] for e in again.sent()].count(REMINDER) == 0


def test_daemon_killed_right_after_the_chat_received_the_reminder_is_done_and_it_arrives_once(
    daemon_root: Path,
) -> None:
    """The window the database cannot see: the chat holds the reminder, the daemon died before it learned
    so. At the next start the reply is sent again with its recorded random_id, the network refuses the
    duplicate, and the task is done — the chat received it once and the model was not asked again."""
    with FakeAnthropic() as api:
        model = ReminderModel(via_tool=False)
        model.stall = False
        api.responder = model
        config = _config(daemon_root, api)
        task_id = _schedule_reminder(daemon_root)
        first = Daemon(daemon_root, config)
        first.env["TELETON_LOOPBACK_DIE_AFTER"] = "1"
        first.start()
        assert first.wait() == -signal.SIGKILL
        first.stop()
        assert [r["text"] for r in first.received()] == [REMINDER]
        calls_before = model.calls

        again = Daemon(daemon_root, config).start()
        try:
            status, result, _ = _settle(daemon_root, again, task_id)
        finally:
            again.stop()
    assert (status, result) == ("done", "delivered (before a restart)")
    assert [r["text"] for r in again.received()] == [REMINDER]  # once, not twice
    assert model.calls == calls_before
