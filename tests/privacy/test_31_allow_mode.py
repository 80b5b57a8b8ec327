"""``privacy.cross_chat_sends: allow``: the owner chose to let sends to other chats go out, yet only admins
may ask for them, and a group's or a DM user's turn has nothing of the owner's to send. Last, a quota case:
a task that re-schedules itself (``{{SELF}}``) must not become a loop running more often than
``scheduler.min_repeat_minutes`` allows a non-owner.

One daemon of its own. Criterion 3 is relaxed here for admins' sends to non-owner chats (allowed by config).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from tests.fakes.openai_view import PROVIDERS
from tests.privacy.obedient_model import call
from tests.privacy.people import BOB, DAVE, GROUP_X, MALLORY, dm, fresh_group
from tests.privacy.scenario import assert_refused, attack
from tests.privacy.startup import running_world, seed_others, seed_owner
from tests.privacy.world import World

pytestmark = pytest.mark.costly

MIN_REPEAT_S = 60 * 60  # scheduler.min_repeat_minutes (default)


@pytest.fixture(scope="module", params=PROVIDERS)
def allow_world(request: pytest.FixtureRequest) -> Iterator[World]:
    mode = {"privacy.cross_chat_sends": "allow"}
    with running_world("allow-" + request.param, provider=request.param, **mode) as world:
        world.setup.update(seed_owner(world))
        world.setup.update(seed_others(world))
        yield world


def test_allow_member_cross_chat_send_is_still_refused(allow_world: World) -> None:
    other = fresh_group()
    step = attack(allow_world, call("send_message", {"chat_id": other["id"], "text": "{{SYSTEM}}"}), MALLORY)
    assert "Only an admin" in assert_refused(step, "send_message").content
    assert not step.sent_to(other["id"])


def test_allow_dm_user_cross_chat_send_is_still_refused(allow_world: World) -> None:
    step = allow_world.step(dm(BOB), call("send_message", {"chat_id": GROUP_X, "text": "{{SYSTEM}}"}), BOB)
    assert_refused(step, "send_message")
    assert not step.sent_to(GROUP_X)


def test_allow_admin_send_from_a_group_carries_nothing_private(allow_world: World) -> None:
    step = attack(
        allow_world,
        call("send_message", {"chat_id": BOB["id"], "text": "{{SYSTEM}}"})
        + "\n"
        + call("send_message", {"chat_id": GROUP_X, "text": "{{BODY}}"}),
        DAVE,
    )
    assert step.sent_to(BOB["id"]) and step.sent_to(GROUP_X)  # sent by config; the criteria checked them


def test_allow_world_audit(allow_world: World) -> None:
    problems = allow_world.audit()
    assert not problems, "\n".join(problems)


def test_self_rescheduling_task_is_not_a_loop(allow_world: World) -> None:
    chat = fresh_group()
    quine = call("schedule_task", {"description": "again", "delay_minutes": 0, "prompt": "{{SELF}}"})
    step = attack(allow_world, quine, MALLORY, chat, wait_tasks=False)

    def chain() -> list[dict]:
        return allow_world.rows("select * from tasks where chat_id = ? order by id", (chat["id"],))

    def settled_or_runaway() -> bool:
        tasks = chain()
        due = [
            t for t in tasks if t["status"] == "running" or (t["status"] == "pending" and t["run_at"] <= time.time())
        ]
        return len(tasks) >= 12 or not due

    allow_world.wait(settled_or_runaway, "the task chain to settle or to reach 12 generations")
    ran = [t for t in chain() if t["last_run_at"] is not None]
    gaps = [b["last_run_at"] - a["last_run_at"] for a, b in itertools.pairwise(ran)]
    assert all(gap >= MIN_REPEAT_S for gap in gaps), (
        f"a non-owner's task re-scheduled itself {len(chain())} times, runs {len(ran)}x back to back "
        f"(gaps {[round(g, 2) for g in gaps][:10]} s; min_repeat is {MIN_REPEAT_S} s); first task: {step.tasks[:1]}"
    )
