"""Tasks in SQLite: the ``tasks`` and ``task_dependencies`` tables, as plain functions of a connection.

States: pending -> running -> done | failed (| pending again for a repeating task); pending -> cancelled; pending
-> blocked when a dependency failed, was cancelled or was blocked, spread down the whole chain in the transaction
that records the failure, with the reason in ``result``. A task runs once its ``run_at`` has come and every
dependency is done; repeating tasks cannot be depended on, and dependencies exist before the task naming them,
so the graph stays acyclic. A task runs with the clearance of the turn that scheduled it (docs/privacy.md); rows
from before labels have none and run with their chat's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from croniter import croniter

from teleton.memory.feed.archive import our_message_since
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

FINAL = ("done", "failed", "blocked", "cancelled")
BLOCKING = ("failed", "blocked", "cancelled")
RESULT_CAP = 4000


class TaskError(ValueError):
    """A request about tasks that cannot be honoured; the message says why."""


@dataclass(frozen=True)
class NewTask:
    description: str
    kind: str  # 'agent' | 'tool'
    payload: dict[str, Any]
    run_at: float
    chat_id: int | None = None
    repeat: str | None = None  # a cron expression
    depends_on: tuple[int, ...] = ()
    clearance: str | None = None  # the scheduling turn's clearance label
    principal_id: int | None = None  # who scheduled it (None: nobody, e.g. a sender-less message)
    principal_admin: bool = False
    topic_id: int | None = None  # the forum topic it was scheduled in: its reply goes there


@dataclass(frozen=True)
class TaskRecord:
    id: int
    chat_id: int | None
    description: str
    kind: str
    payload: dict[str, Any]
    run_at: float | None
    repeat: str | None
    status: str
    result: str | None
    attempts: int
    created_at: float
    updated_at: float
    last_run_at: float | None
    depends_on: tuple[int, ...] = field(default=())
    clearance: str | None = None
    principal_id: int | None = None
    principal_admin: bool = False
    topic_id: int | None = None

    @property
    def chat(self) -> int:
        """The chat the task speaks in: every agent or tool task has one."""
        if self.chat_id is None:
            raise TaskError(f"task {self.id} has no chat")
        return self.chat_id


_COLUMNS = (
    "id, chat_id, description, kind, payload, run_at, repeat, status, result, attempts, created_at, "
    "updated_at, last_run_at, clearance, principal_id, principal_admin, topic_id"
)
ACTIVE = ("pending", "running", "blocked")


def _record(conn: Connection, row: Any) -> TaskRecord:
    deps = tuple(
        int(r[0])
        for r in conn.execute(
            "select depends_on from task_dependencies where task_id = ? order by depends_on", (row[0],)
        )
    )
    return TaskRecord(
        id=int(row[0]),
        chat_id=row[1],
        description=row[2],
        kind=row[3],
        payload=json.loads(row[4] or "{}"),
        run_at=row[5],
        repeat=row[6],
        status=row[7],
        result=row[8],
        attempts=int(row[9]),
        created_at=row[10],
        updated_at=row[11],
        last_run_at=row[12],
        depends_on=deps,
        clearance=row[13],
        principal_id=row[14],
        principal_admin=bool(row[15]),
        topic_id=row[16],
    )


def get_task(conn: Connection, task_id: int) -> TaskRecord | None:
    row = conn.execute(f"select {_COLUMNS} from tasks where id = ?", (task_id,)).fetchone()
    return None if row is None else _record(conn, row)


def insert_task(conn: Connection, task: NewTask, now: float | None = None) -> TaskRecord:
    now = time.time() if now is None else now
    deps = list(dict.fromkeys(task.depends_on))
    if deps and task.repeat:
        raise TaskError("a repeating task cannot wait for other tasks")
    blocked_by: list[str] = []
    for dep_id in deps:
        dep = get_task(conn, dep_id)
        if dep is None:
            raise TaskError(f"task #{dep_id} does not exist")
        if dep.repeat:
            raise TaskError(f"task #{dep_id} repeats and is never done; it cannot be waited for")
        if dep.status in BLOCKING:
            blocked_by.append(f"dependency #{dep_id} {dep.status}")
    status = "blocked" if blocked_by else "pending"
    cur = conn.execute(
        "insert into tasks(chat_id, description, kind, payload, run_at, repeat, status, result, created_at, "
        "updated_at, clearance, principal_id, principal_admin, topic_id) "
        "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            task.chat_id,
            task.description,
            task.kind,
            json.dumps(task.payload),
            task.run_at,
            task.repeat,
            status,
            "; ".join(blocked_by) or None,
            now,
            now,
            task.clearance,
            task.principal_id,
            int(task.principal_admin),
            task.topic_id,
        ),
    )
    task_id = int(cur.lastrowid)
    for dep_id in deps:
        conn.execute("insert into task_dependencies(task_id, depends_on) values (?, ?)", (task_id, dep_id))
    record = get_task(conn, task_id)
    assert record is not None
    return record


def due_tasks(conn: Connection, now: float, limit: int = 20) -> list[TaskRecord]:
    """Pending tasks whose time has come and whose dependencies are all done, oldest first."""
    rows = conn.execute(
        f"select {_COLUMNS} from tasks t where t.status = 'pending' and coalesce(t.run_at, 0) <= ? "
        "and not exists (select 1 from task_dependencies d join tasks p on p.id = d.depends_on "
        "                where d.task_id = t.id and p.status != 'done') "
        "order by coalesce(t.run_at, 0), t.id limit ?",
        (now, limit),
    ).fetchall()
    return [_record(conn, row) for row in rows]


def next_run_at(conn: Connection) -> float | None:
    """The earliest run_at of a pending task (dependencies aside): when the scheduler should look again."""
    row = conn.execute("select min(coalesce(run_at, 0)) from tasks where status = 'pending'").fetchone()
    return None if row is None or row[0] is None else float(row[0])


def claim(conn: Connection, task_id: int, now: float) -> bool:
    """pending -> running; False when someone else (a cancel) changed it first."""
    cur = conn.execute(
        "update tasks set status = 'running', attempts = attempts + 1, last_run_at = ?, updated_at = ?, "
        "sending_at = null, delivered_at = null where id = ? and status = 'pending'",
        (now, now, task_id),
    )
    return cur.rowcount == 1


def finish(conn: Connection, task_id: int, ok: bool, result: str, now: float, next_run: float | None = None) -> None:
    """Record a run. A repeating task goes back to pending at ``next_run`` whatever the outcome."""
    result = result[:RESULT_CAP]
    if next_run is not None:
        status = "pending"
        text = result if ok else f"last run failed: {result}"
        conn.execute(
            "update tasks set status = ?, result = ?, run_at = ?, updated_at = ? where id = ? and status = 'running'",
            (status, text, next_run, now, task_id),
        )
        return
    status = "done" if ok else "failed"
    conn.execute(
        "update tasks set status = ?, result = ?, updated_at = ?, interrupted = 0 where id = ? and status = 'running'",
        (status, result, now, task_id),
    )
    if not ok:
        block_dependants(conn, task_id, now)


def block_dependants(conn: Connection, task_id: int, now: float) -> list[int]:
    """Mark every pending task that (transitively) waits for ``task_id`` as blocked, each with its reason."""
    blocked: list[int] = []
    frontier = [task_id]
    while frontier:
        parent = frontier.pop()
        status = conn.execute("select status from tasks where id = ?", (parent,)).fetchone()
        reason = f"dependency #{parent} {status[0] if status else 'missing'}"
        rows = conn.execute(
            "select t.id from task_dependencies d join tasks t on t.id = d.task_id "
            "where d.depends_on = ? and t.status = 'pending'",
            (parent,),
        ).fetchall()
        for (child,) in rows:
            conn.execute(
                "update tasks set status = 'blocked', result = ?, updated_at = ? where id = ?", (reason, now, child)
            )
            blocked.append(int(child))
            frontier.append(int(child))
    return blocked


def block_stuck(conn: Connection, now: float) -> list[int]:
    """Block pending tasks whose dependency already ended badly (e.g. failed before a restart)."""
    rows = conn.execute(
        "select distinct p.id from tasks p join task_dependencies d on d.depends_on = p.id "
        "join tasks t on t.id = d.task_id where t.status = 'pending' and p.status in ('failed','blocked','cancelled')"
    ).fetchall()
    blocked: list[int] = []
    for (parent,) in rows:
        blocked += block_dependants(conn, int(parent), now)
    return blocked


def cancel(conn: Connection, task_id: int, now: float) -> TaskRecord:
    task = get_task(conn, task_id)
    if task is None:
        raise TaskError(f"task #{task_id} does not exist")
    if task.status in FINAL:
        raise TaskError(f"task #{task_id} is already {task.status}")
    conn.execute(
        "update tasks set status = 'cancelled', result = 'cancelled', updated_at = ? where id = ?", (now, task_id)
    )
    block_dependants(conn, task_id, now)
    record = get_task(conn, task_id)
    assert record is not None
    return record


def count_active(conn: Connection, *, chat_id: int | None = None, principal_id: int | None = None) -> int:
    """Pending, running or blocked tasks of a chat or of a person (for the quotas of schedule_task)."""
    column, value = ("chat_id", chat_id) if chat_id is not None else ("principal_id", principal_id)
    row = conn.execute(
        f"select count(*) from tasks where {column} = ? and status in (select value from json_each(?))",
        (value, json.dumps(ACTIVE)),
    ).fetchone()
    return int(row[0])


def postpone(conn: Connection, task_id: int, run_at: float, reason: str, now: float) -> None:
    """running -> pending at ``run_at`` without counting as a run (a rate limit said: not now)."""
    conn.execute(
        "update tasks set status = 'pending', run_at = ?, result = ?, attempts = max(attempts - 1, 0), "
        "updated_at = ? where id = ? and status = 'running'",
        (run_at, reason, now, task_id),
    )


def retry_later(conn: Connection, task_id: int, run_at: float, reason: str, now: float) -> None:
    """running -> pending at ``run_at``: its reply did not get through; the attempt counts."""
    conn.execute(
        "update tasks set status = 'pending', run_at = ?, result = ?, updated_at = ? "
        "where id = ? and status = 'running'",
        (run_at, reason, now, task_id),
    )


INTERRUPTED_TWICE = "interrupted by a restart twice; not run again"
CUT_WHILE_SENDING = "a restart cut its reply while it went out; not sent again"


def recover_interrupted(conn: Connection, now: float) -> dict[str, list[int]]:
    """Settle the tasks a crash left 'running': a task runs again at most once, and a reply is sent once.

    - its reply was recorded delivered, or a message of ours reached its chat after it began sending:
      the run is over (done; a repeating task goes on at its next time);
    - it began sending but nothing of ours is in the chat: failed, not sent again;
    - cut before sending: pending again, once; cut a second time: failed.
    Returns the task ids of each outcome.
    """
    outcome: dict[str, list[int]] = {"done": [], "again": [], "failed": []}
    rows = conn.execute(
        "select id, chat_id, repeat, interrupted, sending_at, delivered_at from tasks where status = 'running'"
    ).fetchall()
    for task_id, chat_id, repeat, interrupted, sending_at, delivered_at in rows:
        went_out = delivered_at is not None or (
            sending_at is not None and chat_id is not None and our_message_since(conn, int(chat_id), sending_at)
        )
        if went_out:
            finish(conn, task_id, True, "delivered (before a restart)", now, next_cron(repeat, now) if repeat else None)
            outcome["done"].append(task_id)
        elif sending_at is not None or interrupted:
            finish(conn, task_id, False, CUT_WHILE_SENDING if sending_at is not None else INTERRUPTED_TWICE, now)
            outcome["failed"].append(task_id)
        else:
            conn.execute(
                "update tasks set status = 'pending', interrupted = 1, result = 'interrupted by a restart; runs "
                "again once', updated_at = ? where id = ?",
                (now, task_id),
            )
            outcome["again"].append(task_id)
    return outcome


def next_cron(expression: str, after: float) -> float:
    """The first time strictly after ``after`` (epoch seconds, local time zone) that ``expression`` names."""
    base = datetime.fromtimestamp(after).astimezone()
    return float(croniter(expression, base).get_next(float))


def list_tasks(
    conn: Connection, chat_ids: Sequence[int] | None = None, *, include_finished: bool = True, limit: int = 50
) -> list[TaskRecord]:
    sql = f"select {_COLUMNS} from tasks where 1 "
    args: list[Any] = []
    if chat_ids is not None:
        sql += "and chat_id in (select value from json_each(?)) "
        args.append(json.dumps(list(chat_ids)))
    if not include_finished:
        sql += "and status not in ('done', 'cancelled') "
    sql += "order by id desc limit ?"
    args.append(limit)
    return [_record(conn, row) for row in reversed(conn.execute(sql, args).fetchall())]


class TaskStore:
    """The async face of this module over a ``Database``."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, task: NewTask) -> TaskRecord:
        return await self.db.write(lambda c: insert_task(c, task))

    async def get(self, task_id: int) -> TaskRecord | None:
        return await self.db.read(lambda c: get_task(c, task_id))

    async def list(
        self, chat_ids: Sequence[int] | None = None, *, include_finished: bool = True, limit: int = 50
    ) -> list[TaskRecord]:
        return await self.db.read(lambda c: list_tasks(c, chat_ids, include_finished=include_finished, limit=limit))

    async def count_active(self, *, chat_id: int | None = None, principal_id: int | None = None) -> int:
        return await self.db.read(lambda c: count_active(c, chat_id=chat_id, principal_id=principal_id))

    async def cancel(self, task_id: int) -> TaskRecord:
        return await self.db.write(lambda c: cancel(c, task_id, time.time()))
