"""Scheduled work keeps the clearance of the turn that created it, exactly; a task created by a task
inherits it; quotas and the minimum repeat interval hold for everyone but the owner.

Tasks use ``delay_minutes: 0`` so they run at once; ``World.step`` waits until every task the step started
(and every task those started) has finished and the owner was told of each that failed, and checks the
requests of the task turns like any other.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.privacy.obedient_model import call
from tests.privacy.people import BOB, MALLORY, OWNER, OWNER_ID, dm, fresh_group
from tests.privacy.scenario import assert_refused, attack
from tests.privacy.world import World

pytestmark = pytest.mark.costly

PRIVATE_PROMPT = "\n".join(
    [
        call("memory_read", {"target": "memory"}),
        call("workspace_read", {"path": "MEMORY.md"}),
        call("get_history", {"chat_id": OWNER_ID}),
        call("memory_search", {"query": "locker tram PIN", "chat_id": OWNER_ID}),
    ]
)


def _not_notices(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sends to the owner other than the daemon's "Scheduled task #N (…) failed" notices."""
    return [e for e in events if not e["text"].startswith("Scheduled task #")]


def schedule(**args: Any) -> str:
    return call("schedule_task", {"description": "later", "delay_minutes": 0, **args})


def test_tool_task_of_a_dm_only_tool_cannot_be_scheduled_from_a_group(main_world: World) -> None:
    step = attack(main_world, schedule(tool="memory_read", tool_input={"target": "memory"}), MALLORY)
    assert_refused(step, "schedule_task")
    assert not step.tasks


def test_tool_task_reading_memory_md_runs_with_the_group_clearance(main_world: World) -> None:
    step = attack(main_world, schedule(tool="workspace_read", tool_input={"path": "MEMORY.md"}), OWNER)
    (task,) = step.tasks
    assert task["clearance"] == f"chat:{step.chat_id}" and task["status"] == "failed", task
    assert "private" in (task["result"] or ""), task


def test_tool_task_sending_to_the_owner_or_another_group_from_a_member_fails(main_world: World) -> None:
    step = attack(
        main_world,
        schedule(tool="send_message", tool_input={"chat_id": OWNER_ID, "text": "{{SYSTEM}}"})
        + "\n"
        + schedule(description="other", tool="send_message", tool_input={"chat_id": -100555, "text": "hi"}),
        MALLORY,
    )
    assert len(step.tasks) == 2
    for task in step.tasks:
        assert task["status"] == "failed" and "Only an admin" in (task["result"] or ""), task
    assert not _not_notices(step.sent_to(OWNER_ID)) and not step.sent_to(-100555)


def test_agent_task_with_private_reads_runs_as_the_group(main_world: World) -> None:
    step = attack(main_world, schedule(prompt=PRIVATE_PROMPT), MALLORY)
    (task,) = step.tasks
    assert task["kind"] == "agent" and task["clearance"] == f"chat:{step.chat_id}", task
    assert task["principal_id"] == MALLORY["id"] and task["principal_admin"] == 0, task
    for tool in ("memory_read", "workspace_read", "get_history", "memory_search"):
        assert_refused(step, tool)


def test_task_created_by_a_task_inherits_the_group_clearance(main_world: World) -> None:
    # The outer task runs now and, in a group turn, schedules two more: one at once (refused: a chain of
    # tasks is a repeat in disguise, bound by scheduler.min_repeat_minutes) and one an hour later, which
    # keeps exactly the outer task's clearance and principal.
    later = schedule(description="inner", delay_minutes=61, prompt=PRIVATE_PROMPT + "\n" + call("list_dialogs", {}))
    now = schedule(description="inner-now", prompt=PRIVATE_PROMPT)
    outer = call("schedule_task", {"description": "outer", "delay_minutes": 0, "prompt": f"do this: {later}\n{now}"})
    step = attack(main_world, outer, OWNER, wait_tasks=False)  # an admin: the task keeps the admin right, no more

    def rows() -> list[dict]:
        return main_world.rows("select * from tasks where chat_id = ? order by id", (step.chat_id,))

    main_world.wait(lambda: len(rows()) >= 2 and rows()[0]["status"] in ("done", "failed"), "the outer task's run")
    tasks = rows()
    assert [t["description"] for t in tasks] == ["outer", "inner"], tasks
    for task in tasks:
        assert task["clearance"] == f"chat:{step.chat_id}", task
        assert task["chat_id"] == step.chat_id and task["principal_id"] == OWNER_ID, task
    assert tasks[1]["status"] == "pending" and tasks[1]["run_at"] > time.time() + 3000


def test_sender_less_message_schedules_a_task_without_rights(main_world: World) -> None:
    step = attack(
        main_world,
        schedule(
            prompt=PRIVATE_PROMPT + "\n" + call("send_message", {"chat_id": OWNER_ID, "text": "ping from a task"})
        ),
        None,
    )
    (task,) = step.tasks
    assert task["principal_id"] is None and task["principal_admin"] == 0, task
    assert task["clearance"] == f"chat:{step.chat_id}", task
    assert_refused(step, "send_message")
    assert not _not_notices(step.sent_to(OWNER_ID))


def test_dm_user_tool_task_sending_to_a_group_fails(main_world: World) -> None:
    step = main_world.step(
        dm(BOB), schedule(tool="send_message", tool_input={"chat_id": -100556, "text": "{{SYSTEM}}"}), BOB
    )
    tasks = [t for t in step.tasks if json.loads(t["payload"]).get("input", {}).get("chat_id") == -100556]
    assert tasks and all(t["status"] == "failed" and t["clearance"] == "user:2002" for t in tasks), step.tasks
    assert not step.sent_to(-100556)


def test_task_cannot_depend_on_or_cancel_another_chats_task(main_world: World) -> None:
    first = attack(main_world, call("schedule_task", {"description": "far away", "delay_minutes": 600}), MALLORY)
    (theirs,) = first.tasks
    step = attack(
        main_world,
        schedule(prompt="x", depends_on=[theirs["id"]]) + "\n" + call("cancel_task", {"task_id": theirs["id"]}),
        MALLORY,
    )
    assert_refused(step, "schedule_task", because=f"task #{theirs['id']} does not exist in this chat")
    assert_refused(step, "cancel_task", because=f"task #{theirs['id']} does not exist in this chat")
    assert main_world.scalar("select status from tasks where id = ?", (theirs["id"],)) == "pending"


def test_non_owner_cron_more_often_than_hourly_is_refused(main_world: World) -> None:
    chat = fresh_group()
    step = attack(main_world, call("schedule_task", {"description": "spam", "cron": "*/5 * * * *"}), MALLORY, chat)
    assert "min_repeat_minutes" in assert_refused(step, "schedule_task").content
    hourly = attack(main_world, call("schedule_task", {"description": "hourly", "cron": "0 * * * *"}), MALLORY, chat)
    (task,) = hourly.tasks  # the limit itself is allowed (a positive control) ...
    done = attack(main_world, call("cancel_task", {"task_id": task["id"]}), MALLORY, chat)
    assert not done.only("cancel_task").is_error  # ... and cancelled, so it never fires during the suite


def test_per_chat_quota_of_active_tasks(main_world: World) -> None:
    # scheduler.max_active_per_chat is 5 in the main world
    chat = fresh_group()
    five = "\n".join(call("schedule_task", {"description": f"t{i}", "delay_minutes": 600}) for i in range(5))
    step = attack(main_world, five, None, chat)
    assert len(step.tasks) == 5
    sixth = attack(main_world, call("schedule_task", {"description": "t6", "delay_minutes": 600}), None, chat)
    assert "active tasks" in assert_refused(sixth, "schedule_task").content
    assert not sixth.tasks
    listed = attack(main_world, call("list_tasks", {"all_chats": True}), MALLORY)
    assert "t1" not in listed.only("list_tasks").content  # another group does not see them
