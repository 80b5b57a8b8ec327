"""Task tools: schedule_task, list_tasks, cancel_task — thin wrappers over ``teleton.scheduler``.

A task belongs to the chat it was scheduled from and runs there with exactly the clearance, principal and
admin right of the turn that scheduled it; a tool task is checked when scheduled and again when it runs. A
chat sees and cancels only its own tasks (the owner, in their chat, any); quotas and the minimum repeat bind
everyone but the owner (docs/privacy.md, "Scheduled work"). Without ``deps.scheduler`` a task is stored and runs
at the next start of a scheduler.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from croniter import croniter

from teleton.config.schema import SchedulerConfig, default
from teleton.llm.tool_loop import ToolResult
from teleton.privacy import OWNER, Taint
from teleton.privacy.quoting import mark, shown_to
from teleton.scheduler.task_store import NewTask, TaskError, TaskRecord, TaskStore, next_cron
from teleton.tools.registry import Tool, ToolContext, schema, validation_error

PAST_GRACE_S = 120  # "at 09:00" said at 09:01 still runs


@dataclass(frozen=True)
class TaskLimits:
    max_active_per_chat: int = default(SchedulerConfig, "max_active_per_chat")
    max_active_per_user: int = default(SchedulerConfig, "max_active_per_user")
    min_repeat_minutes: int = default(SchedulerConfig, "min_repeat_minutes")

    @classmethod
    def from_config(cls, cfg: SchedulerConfig) -> TaskLimits:
        """From ``config.scheduler``."""
        return cls(cfg.max_active_per_chat, cfg.max_active_per_user, cfg.min_repeat_minutes)


def _store(ctx: ToolContext) -> TaskStore:
    scheduler = ctx.deps.scheduler
    return scheduler.store if scheduler is not None else TaskStore(ctx.deps.db)


def parse_when(args: dict[str, Any], now: float) -> tuple[float, str | None]:
    """(first run time, cron expression or None) from exactly one of at / delay_minutes / cron, or now."""
    given = [k for k in ("at", "delay_minutes", "cron") if args.get(k) is not None]
    if len(given) > 1:
        raise TaskError(f"give only one of at, delay_minutes, cron (got {', '.join(given)})")
    if "at" in given:
        try:
            when = datetime.fromisoformat(str(args["at"]).replace("Z", "+00:00"))
        except ValueError as exc:
            raise TaskError("at must be an ISO date-time like 2026-05-01T09:00 (local time) or with an offset") from exc
        if when.tzinfo is None:
            when = when.astimezone()  # a time without offset is the owner's local time
        if when.timestamp() < now - PAST_GRACE_S:
            # Usually a wrong date or year from the model; running it at once would surprise the user.
            raise TaskError(f"{when.isoformat(timespec='minutes')} is in the past; give a future time")
        return when.timestamp(), None
    if "delay_minutes" in given:
        return (datetime.fromtimestamp(now) + timedelta(minutes=float(args["delay_minutes"]))).timestamp(), None
    if "cron" in given:
        expression = str(args["cron"]).strip()
        if not croniter.is_valid(expression):
            raise TaskError(f"not a valid cron expression: {expression!r} (5 fields: min hour day month weekday)")
        return next_cron(expression, now), expression
    return now, None


def _visible_chats(ctx: ToolContext, everything: bool) -> list[int] | None:
    if everything and ctx.clearance.is_owner:
        return None
    return [ctx.chat.id]


def shortest_gap_s(expression: str, now: float, fires: int = 50) -> float:
    """The shortest time between two of the next ``fires`` runs of a cron expression."""
    times = [next_cron(expression, now)]
    for _ in range(fires - 1):
        times.append(next_cron(expression, times[-1]))
    return min(b - a for a, b in pairwise(times))


async def _check_limits(
    ctx: ToolContext, store: TaskStore, run_at: float, repeat: str | None, limits: TaskLimits
) -> None:
    if ctx.clearance.is_owner:
        return
    # A task that schedules a task is a repeat in disguise: the same interval floor applies to it.
    if ctx.from_task and run_at - time.time() < limits.min_repeat_minutes * 60:
        raise TaskError(
            f"a task started by a scheduled task must wait at least {limits.min_repeat_minutes} minutes "
            "(scheduler.min_repeat_minutes); only the owner can chain tasks faster"
        )
    if repeat is not None and shortest_gap_s(repeat, time.time()) < limits.min_repeat_minutes * 60:
        raise TaskError(
            f"a task here may repeat at most every {limits.min_repeat_minutes} minutes "
            "(scheduler.min_repeat_minutes); only the owner can schedule more often"
        )
    in_chat = await store.count_active(chat_id=ctx.chat.id)
    if in_chat >= limits.max_active_per_chat:
        raise TaskError(
            f"this chat already has {in_chat} active tasks (limit {limits.max_active_per_chat}); "
            "cancel one or wait for one to finish"
        )
    if ctx.sender is not None:
        mine = await store.count_active(principal_id=ctx.sender.id)
        if mine >= limits.max_active_per_user:
            raise TaskError(
                f"you already have {mine} active tasks (limit {limits.max_active_per_user}); "
                "cancel one or wait for one to finish"
            )


def describe(task: TaskRecord) -> str:
    when = datetime.fromtimestamp(task.run_at).astimezone().strftime("%Y-%m-%d %H:%M") if task.run_at else "-"
    parts = [f"#{task.id} [{task.status}] {task.description}"]
    if task.status == "pending":
        parts.append(f"next: {when}")
    if task.repeat:
        parts.append(f"repeats: {task.repeat}")
    if task.depends_on:
        parts.append("after: " + ", ".join(f"#{d}" for d in task.depends_on))
    if task.kind == "tool":
        parts.append(f"tool: {task.payload.get('tool')}")
    if task.result:
        parts.append(f"result: {task.result[:300]}")
    return " | ".join(parts)


async def schedule_task(args: dict[str, Any], ctx: ToolContext, limits: TaskLimits) -> str | ToolResult:
    store = _store(ctx)
    try:
        run_at, repeat = parse_when(args, time.time())
        await _check_limits(ctx, store, run_at, repeat, limits)
        deps = tuple(int(d) for d in args.get("depends_on") or ())
        for dep_id in deps:
            dep = await store.get(dep_id)
            if dep is None or (dep.chat_id != ctx.chat.id and not ctx.clearance.is_owner):
                raise TaskError(f"task #{dep_id} does not exist in this chat")
        kind, payload = _action(args, ctx)
        # What the scheduling turn was shown goes with the task: run later, it is as steered as it was now.
        payload["taint"] = ctx.taint.to_json()
        task = await store.add(
            NewTask(
                description=args["description"],
                kind=kind,
                payload=payload,
                run_at=run_at,
                chat_id=ctx.chat.id,
                repeat=repeat,
                depends_on=deps,
                clearance=ctx.clearance.label,
                principal_id=ctx.sender.id if ctx.sender else None,
                principal_admin=ctx.is_admin,
                topic_id=ctx.topic_id,
            )
        )
    except TaskError as exc:
        return ToolResult.error(str(exc))
    scheduler = ctx.deps.scheduler
    if scheduler is not None:
        scheduler.wake()
    return "Scheduled: " + describe(task)


def _action(args: dict[str, Any], ctx: ToolContext) -> tuple[str, dict[str, Any]]:
    tool_name = args.get("tool")
    if not tool_name:
        return "agent", {"prompt": args.get("prompt") or args["description"]}
    scheduler = ctx.deps.scheduler
    registry = getattr(scheduler, "registry", None)
    if registry is None:
        raise TaskError("tool tasks need the scheduler; schedule a prompt instead")
    tool = registry.get(tool_name)
    if tool is None or not registry.allowed(tool_name, ctx.chat, ctx.is_admin, is_owner=ctx.clearance.is_owner):
        raise TaskError(f"tool {tool_name!r} is not available in this chat")
    tool_input = args.get("tool_input") or {}
    problem = validation_error(tool.input_schema, tool_input)
    if problem:
        raise TaskError(f"invalid tool_input for {tool_name}: {problem}")
    return "tool", {"tool": tool_name, "input": tool_input}


async def list_tasks(args: dict[str, Any], ctx: ToolContext) -> str:
    tasks = await _store(ctx).list(
        _visible_chats(ctx, bool(args.get("all_chats"))), include_finished=bool(args.get("include_finished", True))
    )
    if not tasks:
        return "No tasks."
    lines = []
    for task in tasks:  # another chat's task: its words are that chat's, quoted with their origin
        label = task.clearance or (OWNER if task.chat_id is None else ctx.deps.principals.chat_label(task.chat_id))
        ctx.shown(label)
        # A task a steered turn scheduled is as steered as that turn (its description may be planted words).
        steered = Taint.from_json(task.payload["taint"]).steering(label) if "taint" in task.payload else ()
        lines.append(shown_to(ctx.clearance.label, label, mark(describe(task), steered)))
    return "\n".join(lines)


async def cancel_task(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    store = _store(ctx)
    task_id = int(args["task_id"])
    task = await store.get(task_id)
    visible = _visible_chats(ctx, True)
    if task is None or (visible is not None and task.chat_id not in visible):
        return ToolResult.error(f"task #{task_id} does not exist in this chat")
    try:
        cancelled = await store.cancel(task_id)
    except TaskError as exc:
        return ToolResult.error(str(exc))
    scheduler = ctx.deps.scheduler
    if scheduler is not None:
        scheduler.cancel_running(task_id)
        scheduler.wake()
    return "Cancelled: " + describe(cancelled)


def task_tools(limits: TaskLimits = TaskLimits()) -> list[Tool]:
    async def schedule(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
        return await schedule_task(args, ctx, limits)

    return [
        Tool(
            name="schedule_task",
            description=(
                "Schedule a reminder or a task for later: at a date and time, after a delay (in N minutes, "
                "tomorrow), or repeating on a cron schedule (every day at 9, every Monday). When it is due you "
                "get the prompt as a new message in this chat and act on it. Can wait for other tasks "
                "(depends_on) or call one tool."
            ),
            input_schema=schema(
                {
                    "description": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 500,
                        "description": "short human-readable description of the task",
                    },
                    "prompt": {
                        "type": "string",
                        "maxLength": 4000,
                        "description": "what to tell yourself when it is due (default: description)",
                    },
                    "at": {"type": "string", "description": "ISO date-time, e.g. 2026-05-01T09:00 (local)"},
                    "delay_minutes": {"type": "number", "minimum": 0, "maximum": 525600},
                    "cron": {"type": "string", "description": "repeat: 5-field cron, e.g. '0 9 * * 1-5'"},
                    "depends_on": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "maxItems": 20,
                        "description": "task ids that must be done first",
                    },
                    "tool": {"type": "string", "description": "run this tool instead of a prompt"},
                    "tool_input": {"type": "object"},
                },
                ("description",),
            ),
            handler=schedule,
            category="tasks",
        ),
        Tool(
            name="list_tasks",
            description="List scheduled tasks and reminders with their status (pending, done, failed, blocked).",
            input_schema=schema(
                {
                    "include_finished": {"type": "boolean"},
                    "all_chats": {"type": "boolean", "description": "the owner in their own chat: every chat"},
                }
            ),
            handler=list_tasks,
            category="tasks",
        ),
        Tool(
            name="cancel_task",
            description="Cancel a scheduled task or reminder by its id; tasks waiting for it become blocked.",
            input_schema=schema({"task_id": {"type": "integer"}}, ("task_id",)),
            handler=cancel_task,
            category="tasks",
        ),
    ]
