"""The scheduler: runs due tasks and the daemon's periodic jobs inside its event loop (docs/tools.md).

A task (``task_store``) is an ``agent`` turn through the injected ``run_agent_turn(task, text)``, or one ``tool``
call through the registry's own door (``ToolRegistry.execute``: scope and input checks at run time too); both run
with the clearance, principal and admin right stored with the task, never more. A turn that may not run now raises
``NotNow`` and the task waits, uncounted. After a restart running tasks are re-queued, and a repeating task that
missed occurrences runs once, then keeps its rhythm from now. A periodic job (``add_periodic``) never runs twice
at once: its next run starts ``interval_s`` after the previous one ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

import structlog

from teleton.llm.tool_loop import ToolCall, ToolResult
from teleton.privacy import OWNER
from teleton.privacy.quoting import label_origin, quote
from teleton.process.supervisor import Supervisor
from teleton.scheduler import task_store
from teleton.scheduler.task_store import TaskRecord, TaskStore, next_cron
from teleton.storage.database import Database


class ToolDoor(Protocol):
    """The tool registry's one door (``tools/registry.py``, above this layer): what a tool task calls."""

    async def execute(self, call: ToolCall, ctx: Any) -> ToolResult: ...


log = structlog.get_logger(__name__)

RunAgentTurn = Callable[[TaskRecord, str], Awaitable[Any]]
ContextFor = Callable[[TaskRecord], Awaitable[Any]]  # the task -> the ToolContext its tool call runs in
PeriodicJob = Callable[[], Awaitable[Any]]
NOT_NOW_DELAY_S = 60.0
DELIVERY_ATTEMPTS = 5  # tries to deliver a task's reply before it fails (and the owner is told)
DELIVERY_RETRY_S = (30.0, 120.0, 600.0, 1800.0)  # waits between them


class NotNow(Exception):
    """A task may not run now (a rate limit); it is tried again later without counting as a run."""


class NotDelivered(Exception):
    """A task ran but its reply did not reach the chat: tried again later, up to DELIVERY_ATTEMPTS."""


def failure_notice(task: TaskRecord, error: str) -> str:
    """What the owner is told when a task fails. Its words came from whoever scheduled it: unless that was
    the owner, they are quoted with their origin, so the owner's chat never holds them as instructions."""
    detail = f"({task.description}) failed: {error}"
    if task.clearance == OWNER or (task.clearance is None and task.chat_id is None):
        return f"Scheduled task #{task.id} {detail}"
    origin = label_origin(task.clearance or f"chat:{task.chat_id}", str(task.chat_id))
    return f"Scheduled task #{task.id} failed:\n{quote(detail, origin)}"


def task_prompt(task: TaskRecord) -> str:
    """What the agent is told when a task falls due: framed, so it knows this is not a new user message."""
    prompt = str(task.payload.get("prompt") or task.description)
    return f"[Scheduled task #{task.id} is due: {task.description}]\n{prompt}"


@dataclass
class _Periodic:
    name: str
    interval_s: float
    fn: PeriodicJob
    run_at_start: bool
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loop_task: asyncio.Task[None] | None = None
    runs: int = 0
    last_error: str | None = None


@dataclass(frozen=True)
class SchedulerSettings:
    max_sleep_s: float = 30.0  # look at the table at least this often (clock jumps, missed wakes)
    task_timeout_s: float = 600.0
    batch: int = 20


class Scheduler:
    def __init__(
        self,
        db: Database,
        *,
        run_agent_turn: RunAgentTurn | None = None,
        registry: ToolDoor | None = None,  # the tool registry, for tool tasks
        context_for: ContextFor | None = None,
        settings: SchedulerSettings = SchedulerSettings(),
        clock: Callable[[], float] = time.time,
        tell_owner: Callable[[str], Awaitable[Any]] | None = None,
    ) -> None:
        self.store = TaskStore(db)
        self.db = db
        self.run_agent_turn = run_agent_turn
        self.registry = registry
        self.context_for = context_for
        self.settings = settings
        self.clock = clock
        self._wake = asyncio.Event()
        self._running: dict[int, asyncio.Task[None]] = {}
        self._periodic: dict[str, _Periodic] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._stopping = False
        self.tell_owner = tell_owner  # a task that finally fails is told to the owner
        self.supervisor: Supervisor | None = None

    # -- periodic jobs -------------------------------------------------------------------------------
    def add_periodic(self, name: str, interval_s: float, coro_fn: PeriodicJob, *, run_at_start: bool = False) -> None:
        """Run ``coro_fn()`` every ``interval_s`` seconds (measured from the end of the previous run)."""
        if name in self._periodic:
            raise ValueError(f"periodic job {name!r} added twice")
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        job = _Periodic(name, interval_s, coro_fn, run_at_start)
        self._periodic[name] = job
        if self._loop_task is not None:  # already started: start this job's loop too
            job.loop_task = asyncio.get_running_loop().create_task(self._periodic_loop(job), name=f"job-{name}")

    async def run_now(self, name: str) -> bool:
        """Run a periodic job at once; False (and nothing done) if it is running already."""
        job = self._periodic[name]
        if job.lock.locked():
            return False
        await self._run_job(job)
        return True

    def job_runs(self, name: str) -> int:
        return self._periodic[name].runs

    async def _run_job(self, job: _Periodic) -> None:
        async with job.lock:
            try:
                await job.fn()
                job.last_error = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failing job logs and tries again next interval
                job.last_error = repr(exc)
                log.warning("periodic_job_failed", job=job.name, error=repr(exc))
                if self.supervisor is not None:
                    self.supervisor.report(job.name, exc)
            finally:
                job.runs += 1

    async def _periodic_loop(self, job: _Periodic) -> None:
        if not job.run_at_start:
            await asyncio.sleep(job.interval_s)
        while True:
            if not job.lock.locked():
                await self._run_job(job)
            await asyncio.sleep(job.interval_s)

    # -- life cycle ----------------------------------------------------------------------------------
    async def start(
        self,
        supervisor: Supervisor | None = None,
        *,
        run_agent_turn: RunAgentTurn | None = None,
        context_for: ContextFor | None = None,
    ) -> None:
        """Settle tasks a crash left running (each runs again at most once; one whose reply already went
        out is done), then run the task loop (supervised) and every periodic job. ``run_agent_turn`` and
        ``context_for`` come from the agent, which is built after the scheduler its tools hand tasks to."""
        self.run_agent_turn = run_agent_turn or self.run_agent_turn
        self.context_for = context_for or self.context_for
        outcome = await self.db.write(lambda c: task_store.recover_interrupted(c, self.clock()))
        if any(outcome.values()):
            log.warning("tasks_recovered", **{k: len(v) for k, v in outcome.items()})
        for task_id in outcome["failed"]:  # told like any other failed task
            task = await self.db.read(partial(task_store.get_task, task_id=task_id))
            if task is not None:
                await self._tell_owner(failure_notice(task, task.result or "interrupted by a restart"))
        loop = asyncio.get_running_loop()
        self.supervisor = supervisor or Supervisor(lambda name, reason: None)
        self._loop_task = self.supervisor.run("scheduler", self._task_loop)
        for job in self._periodic.values():
            job.loop_task = loop.create_task(self._periodic_loop(job), name=f"job-{job.name}")

    def wake(self) -> None:
        """Look at the table now (a task was added, cancelled or finished)."""
        self._wake.set()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop taking work; give running tasks ``grace_s`` to finish, then cancel them (they re-run at start)."""
        self._stopping = True
        loops = [t for t in [self._loop_task, *(j.loop_task for j in self._periodic.values())] if t]
        for task in loops:
            task.cancel()
        running = list(self._running.values())
        if running:
            _, pending = await asyncio.wait(running, timeout=grace_s)
            for task in pending:
                task.cancel()
        # gather, not "suppress(CancelledError): await task": that also swallowed a cancel of stop()'s caller.
        await asyncio.gather(*loops, *running, return_exceptions=True)

    # -- tasks ---------------------------------------------------------------------------------------
    async def _task_loop(self, up: Callable[[], None]) -> None:
        up()
        while not self._stopping:
            await self.run_due()  # a failure (a database hiccup) goes to the supervisor: retried with backoff
            await self._sleep_until_next()

    async def _sleep_until_next(self) -> None:
        # Cleared before the read: a wake() while the read runs (a task finishing, a new one) is kept. Cleared
        # after it, such a wake was lost and the loop slept max_sleep_s with a task due (a suite run hung on it).
        self._wake.clear()
        nxt = await self.db.read(task_store.next_run_at)
        delay = self.settings.max_sleep_s
        if nxt is not None:
            delay = max(0.0, min(nxt - self.clock(), delay))
        # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancel that lands as the wake arrives, and
        # stop() then waited forever on a loop the supervisor kept restarting (a loaded suite run hung on it).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(delay, 0.05)):
                await self._wake.wait()

    async def run_due(self) -> list[int]:
        """One pass: block tasks whose dependency ended badly, start every due task. Returns started ids."""
        now = self.clock()
        await self.db.write(lambda c: task_store.block_stuck(c, now))
        due = await self.db.read(lambda c: task_store.due_tasks(c, now, self.settings.batch))
        started = []
        for task in due:
            if task.id in self._running:
                continue
            claimed = await self.db.write(partial(task_store.claim, task_id=task.id, now=self.clock()))
            if not claimed:
                continue
            task = replace(task, attempts=task.attempts + 1)  # as claim() counted it: this run is a try
            runner = asyncio.get_running_loop().create_task(self._run_task(task), name=f"task-{task.id}")
            self._running[task.id] = runner
            runner.add_done_callback(partial(self._forget_runner, task.id))
            started.append(task.id)
        return started

    async def wait_idle(self) -> None:
        """Wait until no task is running (tests, shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    def _forget_runner(self, task_id: int, _runner: asyncio.Task[None]) -> None:
        self._running.pop(task_id, None)

    def cancel_running(self, task_id: int) -> None:
        runner = self._running.get(task_id)
        if runner is not None:
            runner.cancel()

    async def _run_task(self, task: TaskRecord) -> None:
        ok, text = False, ""
        try:
            ok, text = await asyncio.wait_for(self._execute(task), timeout=self.settings.task_timeout_s)
        except TimeoutError:
            text = f"timed out after {self.settings.task_timeout_s:g} s"
        except asyncio.CancelledError:
            if self._stopping:  # shutdown: leave it 'running'; it is re-queued at the next start
                raise
            text = "cancelled while running"
        except NotNow as exc:
            now = self.clock()
            reason = f"waiting: {exc}"
            await self.db.write(lambda c: task_store.postpone(c, task.id, now + NOT_NOW_DELAY_S, reason, now))
            log.info("task_postponed", task=task.id, reason=str(exc))
            return
        except NotDelivered as exc:
            if task.attempts < DELIVERY_ATTEMPTS:
                now = self.clock()
                wait = DELIVERY_RETRY_S[min(task.attempts - 1, len(DELIVERY_RETRY_S) - 1)]
                reason = f"reply not delivered (try {task.attempts} of {DELIVERY_ATTEMPTS}): {exc}"
                await self.db.write(lambda c: task_store.retry_later(c, task.id, now + wait, reason, now))
                log.warning("task_delivery_failed", task=task.id, attempt=task.attempts, error=str(exc))
                return
            text = f"reply not delivered after {DELIVERY_ATTEMPTS} tries: {exc}"
        except Exception as exc:
            text = f"{type(exc).__name__}: {exc}"
        next_run = next_cron(task.repeat, self.clock()) if task.repeat else None
        now = self.clock()
        await self.db.write(lambda c: task_store.finish(c, task.id, ok, text, now, next_run))
        log.info("task_ran", task=task.id, kind=task.kind, ok=ok, repeat=bool(task.repeat))
        if not ok:
            await self._tell_owner(failure_notice(task, text))
        self.wake()  # dependants may be due now

    async def _tell_owner(self, text: str) -> None:
        if self.tell_owner is None:
            return
        try:
            await self.tell_owner(text)
        except Exception as exc:  # the failure stays in the task's row and the log
            log.warning("owner_not_told", error=repr(exc))

    async def _execute(self, task: TaskRecord) -> tuple[bool, str]:
        if task.kind == "agent":
            if self.run_agent_turn is None or task.chat_id is None:
                return False, "no agent to run this task"
            answer = await self.run_agent_turn(task, task_prompt(task))
            return True, str(answer or "done")
        if self.registry is None or self.context_for is None or task.chat_id is None:
            return False, "tool tasks are not available"
        ctx = await self.context_for(task)
        tool_input = dict(task.payload.get("input") or {})
        call = ToolCall(id=f"task-{task.id}", name=str(task.payload.get("tool")), input=tool_input)
        outcome: ToolResult = await self.registry.execute(call, ctx)
        return not outcome.is_error, outcome.content
