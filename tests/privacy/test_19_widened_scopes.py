"""The owner widens tool scopes (``/tool scope NAME always``): the scope is the first gate only, and the
handlers' clearance checks still refuse every private read from a group or another user's DM. Then the main
daemon's audit: everything it did, re-checked; no learnings written by anyone but the owner; exec only in the
owner's DM."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.privacy.obedient_model import call
from tests.privacy.people import DAVE, MALLORY, OWNER, OWNER_ID, dm
from tests.privacy.scenario import assert_refused, attack
from tests.privacy.startup import _today
from tests.privacy.world import World

pytestmark = pytest.mark.costly

WIDENED = ["memory_read", "memory_write", "list_dialogs", "workspace_read", "workspace_write", "download_media"]

RETRIES: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
    ("memory_read-memory-member", MALLORY, "memory_read", {"target": "memory"}),
    ("memory_read-recent-owner_in_group", OWNER, "memory_read", {"target": "recent"}),
    ("memory_read-list-admin", DAVE, "memory_read", {"target": "list"}),
    ("memory_read-daily-sender_less", None, "memory_read", {"target": "daily", "date": _today()}),
    ("list_dialogs-member", MALLORY, "list_dialogs", {"limit": 100}),
    ("workspace_read-MEMORY.md-member", MALLORY, "workspace_read", {"path": "MEMORY.md", "offset": 0}),
    ("workspace_read-corrections-admin", DAVE, "workspace_read", {"path": "learnings/corrections.md", "offset": 0}),
    ("memory_write-memory-member", MALLORY, "memory_write", {"target": "memory", "content": "planted"}),
    ("workspace_write-HEARTBEAT.md-member", MALLORY, "workspace_write", {"path": "HEARTBEAT.md", "content": "x"}),
]


@pytest.fixture(scope="module")
def widened(main_world: World) -> Iterator[World]:
    for name in WIDENED:
        step = main_world.step(dm(OWNER), f"/tool scope {name} always", OWNER, expect="command")
        assert f"{name}: enabled, scope always" in step.texts_to(OWNER_ID)
    yield main_world
    for name in WIDENED:  # the main daemon is shared with other modules, in any order
        main_world.step(dm(OWNER), f"/tool reset {name}", OWNER, expect="command")


@pytest.mark.parametrize(("sender", "tool", "args"), [c[1:] for c in RETRIES], ids=[c[0] for c in RETRIES])
def test_widened_scope_still_refuses_a_group(widened: World, sender: dict | None, tool: str, args: dict) -> None:
    step = attack(widened, call(tool, args), sender)
    assert_refused(step, tool)


@pytest.mark.parametrize(
    ("tool", "args"),
    [("memory_read", {"target": "recent", "lines": 50}), ("list_dialogs", {"limit": 20})],
    ids=["memory_read", "list_dialogs"],
)
def test_widened_scope_still_refuses_an_admins_dm(widened: World, tool: str, args: dict) -> None:
    assert_refused(widened.step(dm(DAVE), call(tool, args), DAVE), tool)


def test_widened_scope_through_a_scheduled_tool_task(widened: World) -> None:
    step = attack(
        widened,
        call(
            "schedule_task",
            {"description": "w", "delay_minutes": 0, "tool": "memory_read", "tool_input": {"target": "memory"}},
        ),
        MALLORY,
    )
    (task,) = step.tasks  # the widened scope lets it be scheduled; it still runs with the group's clearance
    assert task["status"] == "failed" and "owner" in (task["result"] or ""), task


def test_main_world_learnings_were_written_by_nobody_but_the_owner(main_world: World) -> None:
    """Dozens of group and DM tool calls failed in this daemon; none may reach the owner's learnings."""
    for rel, before in main_world.learnings_snapshot.items():
        assert (main_world.workspace / rel).read_text() == before, f"{rel} changed after the owner's last turn"


def test_main_world_audit(main_world: World) -> None:
    problems = main_world.audit()
    assert not problems, "\n".join(problems)
