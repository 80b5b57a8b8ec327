"""A private chat's answer appears in Telegram as the model writes it: one message, edited as text arrives.

Real Telethon (the recording client: every request as Telethon builds it), the real agent, the real
``openai`` SDK streaming from the scripted OpenAI-compatible server, which writes a word at a time. Time is
a clock the test owns: it moves a little at every look, and the gateway's waits move it on, so what is
asserted is the order and spacing of the changes by that clock, never how long anything took.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from telethon import errors, functions
from telethon.tl import types

from teleton.storage import Database
from tests.fakes.anthropic_server import text, tool_use
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.conftest import ADMIN, GROUP
from tests.telegram.stream_world import ANSWER, World, answered, assert_settled, make_world


@pytest.fixture
def fake_api() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.pace_s = 0.001  # a word at a time reaches the client apart from the next
        yield server


@pytest.fixture
async def world(tmp_path: Path, db: Database, fake_api: FakeOpenAI) -> AsyncIterator[World]:
    async for made in make_world(tmp_path, db, fake_api):
        yield made


async def test_a_long_answer_is_one_message_edited_at_most_once_a_second(world: World) -> None:
    answered(world.fake, text(ANSWER))
    await world.say("tell me a long story")
    sends = world.to_owner(functions.messages.SendMessageRequest)
    edits = world.to_owner(functions.messages.EditMessageRequest)
    assert len(sends) == 1 and len(edits) >= 3  # one message, shown growing
    assert ANSWER.startswith(sends[0].message) and len(sends[0].message) < len(ANSWER)
    shown = [edit.message for edit in edits]
    assert all(ANSWER.startswith(s) for s in shown) and shown == sorted(shown, key=len)  # only ever growing
    assert shown[-1] == ANSWER  # the final edit is the whole answer
    times = [at for _, at, _ in world.changes]
    assert all(later - earlier >= world.gateway.stream_interval_s for earlier, later in itertools.pairwise(times))
    archived = await world.db.fetchall("select text from tg_messages where chat_id = ? and is_outgoing = 1",
                                       (ADMIN.id,))  # fmt: skip
    assert [r[0] for r in archived] == [ANSWER]  # the reply once, as it ended
    await assert_settled(world.db)


async def test_a_flood_wait_on_an_edit_finishes_the_answer_in_one_piece(world: World) -> None:
    answered(world.fake, text(ANSWER))
    witness = world.client.fail_when
    assert witness is not None
    flooded: list[Any] = []

    def flood_once(request: Any) -> BaseException | None:
        witness(request)
        if isinstance(request, functions.messages.EditMessageRequest) and not flooded:
            flooded.append(request)
            return errors.FloodWaitError(request=None, capture=3)
        return None

    world.client.fail_when = flood_once
    await world.say("tell me a long story")
    edits = world.to_owner(functions.messages.EditMessageRequest)
    assert len(world.to_owner(functions.messages.SendMessageRequest)) == 1
    assert edits[0] is flooded[0] and len(edits) == 2  # no edit after the flood but the final one
    assert edits[-1].message == ANSWER
    (_, flooded_at, _), (_, final_at, _) = world.changes[-2:]
    assert final_at - flooded_at >= 3  # the pause Telegram asked for, waited once, before the last edit
    await assert_settled(world.db)


async def test_stream_edits_off_sends_the_answer_once(tmp_path: Path, db: Database, fake_api: FakeOpenAI) -> None:
    async for world in make_world(tmp_path, db, fake_api, stream_edits=False):
        answered(world.fake, text(ANSWER))
        await world.say("tell me a long story")
        assert [r.message for r in world.to_owner(functions.messages.SendMessageRequest)] == [ANSWER]
        assert not world.to_owner(functions.messages.EditMessageRequest)
        assert not [b for b in world.fake.requests if b.get("stream")]  # nobody watches: not even streamed


async def test_a_held_send_never_streams_and_the_answer_replaces_what_was_shown(world: World) -> None:
    payload = "The secret plan: meet at the old mill at midnight, bring the ledger."
    answered(
        world.fake,
        tool_use(("send_message", {"chat_id": -GROUP.id, "text": payload}), say="I will pass that on to the club."),
        text("It waits for your approval."),
    )
    await world.say("tell the book club the plan")
    streamed = [r for kind, _, r in world.changes if kind == "EditMessageRequest"] + [
        r for kind, _, r in world.changes if kind == "SendMessageRequest" and r.reply_markup is None
    ]
    notice = [r for r in world.to_owner(functions.messages.SendMessageRequest) if "Held #1" in r.message]
    assert len(notice) == 1 and payload in notice[0].message  # the owner sees the payload in the notice only
    assert not any(payload in r.message for r in streamed if r not in notice)
    assert not [r for r in world.client.requests if isinstance(getattr(r, "peer", None), types.InputPeerChat)]
    replies = [r.message for r in world.to_owner(functions.messages.EditMessageRequest)]
    assert replies[-1] == "It waits for your approval."  # the interim words replaced by the answer
    await assert_settled(world.db)
