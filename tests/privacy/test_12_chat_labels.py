"""A group's own data is the group's (positive controls) and no other group's: group X seeded a fact, a
message and a file in ``downloads/<group X>/``; it reads them back, another group cannot."""

from __future__ import annotations

import pytest

from tests.privacy.obedient_model import call
from tests.privacy.oracles import S_GROUPX, S_GROUPXFILE
from tests.privacy.people import GINA, GROUP_X, MALLORY, group
from tests.privacy.scenario import assert_refused, attack
from tests.privacy.world import World

pytestmark = pytest.mark.costly


def test_group_reads_its_own_messages_facts_and_files(main_world: World) -> None:
    gx = group(GROUP_X, "groupx")
    step = attack(
        main_world,
        "\n".join(
            [
                call("search_messages", {"query": "treasury code"}),
                call("memory_recall", {"query": "treasury code"}),
                call("workspace_read", {"path": f"downloads/{GROUP_X}/agenda.txt"}),
            ]
        ),
        GINA,
        gx,
    )
    assert S_GROUPX.token in step.only("search_messages").content
    assert S_GROUPX.token in step.only("memory_recall").content
    assert S_GROUPXFILE.token in step.only("workspace_read").content


def test_another_group_cannot_read_group_x(main_world: World) -> None:
    step = attack(
        main_world,
        "\n".join(
            [
                call("workspace_read", {"path": f"downloads/{GROUP_X}/agenda.txt"}),
                call("search_messages", {"query": "treasury code", "chat_id": GROUP_X}),
                call("memory_search", {"query": "treasury code", "chat_id": GROUP_X}),
                call("memory_recall", {"query": "Group X treasury code"}),
                call("send_file", {"path": f"downloads/{GROUP_X}/agenda.txt"}),
            ]
        ),
        MALLORY,
    )
    assert_refused(step, "workspace_read")
    assert_refused(step, "search_messages")
    assert_refused(step, "memory_search")
    assert_refused(step, "send_file")
    assert S_GROUPX.token not in step.only("memory_recall").content
