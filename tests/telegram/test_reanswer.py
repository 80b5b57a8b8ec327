"""A message edited or deleted soon after its answer: real Telethon TL updates through an unconnected client,
the real agent, the real ``openai`` SDK against the scripted server on 127.0.0.1.

An edit within ``telegram.reanswer_edit_minutes`` re-runs the turn on the new words and edits the answer in
place (and not after the window); a message deleted within it takes its answer with it in a private chat
(and not in a group, by default).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from telethon import functions, utils
from telethon.tl import types

from teleton.storage import Database
from tests.agent.conftest import MAIN_MODEL
from tests.fakes.anthropic_server import Reply, text
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.conftest import ADMIN, ALICE, GROUP, attach, new_message, peer_of
from tests.telegram.stream_world import World, deliver, make_world

GROUP_ID = utils.get_peer_id(GROUP)
LONG = " ".join(f"Sentence {i} of a long first answer." for i in range(200))  # two messages


@pytest.fixture
async def world(tmp_path: Path, db: Database, fake_openai: FakeOpenAI) -> AsyncIterator[World]:
    async for made in make_world(tmp_path, db, fake_openai, stream_edits=False):
        yield made


def answers(world: World, *replies: str) -> list[str]:
    """The main model answers with ``replies`` in order and records what it was asked."""
    queue, asked = list(replies), []

    def respond(body: dict[str, Any]) -> Reply:
        if body["model"] != MAIN_MODEL:
            return text("ok")
        asked.append(str(body["messages"][-1]["content"]))
        return text(queue.pop(0))

    world.fake.responder = respond
    return asked


def edited(update: Any, words: str) -> Any:
    """The same message, edited by its sender (Telegram's edit update carries the whole new message)."""
    message = update.message
    message.message, message.edit_date = words, datetime.now(UTC)
    channel = isinstance(update, types.UpdateNewChannelMessage)
    cls = types.UpdateEditChannelMessage if channel else types.UpdateEditMessage
    return attach(cls(message=message, pts=2, pts_count=1), *update._entities.values())


def deleted(*ids: int) -> Any:
    return attach(types.UpdateDeleteMessages(messages=list(ids), pts=3, pts_count=len(ids)))  # a DM or basic group


def requests(world: World, kind: type, chat: Any) -> list[Any]:
    peer = utils.get_peer_id(peer_of(chat))
    return [r for r in world.client.requests if isinstance(r, kind) and utils.get_peer_id(r.peer) == peer]


def deletions(world: World) -> list[list[int]]:
    """The message ids of each deletion asked (a private chat's or basic group's names no chat)."""
    return [r.id for r in world.client.requests if isinstance(r, functions.messages.DeleteMessagesRequest)]


async def state(world: World, chat_id: int, message_id: int) -> str:
    row = await world.db.fetchone(
        "select agent_state from tg_messages where chat_id = ? and message_id = ?", (chat_id, message_id)
    )
    return str(row[0])


async def test_an_edit_within_the_window_is_answered_again_in_the_same_message(world: World) -> None:
    asked = answers(world, "Four.", "Six.")
    question = new_message(GROUP, ALICE, "@teleton_bot what is 2+2?")
    await deliver(world, question)
    (first,) = requests(world, functions.messages.SendMessageRequest, GROUP)
    reply_id = int((await world.db.fetchone("select max(message_id) from tg_messages where is_outgoing = 1"))[0])

    await deliver(world, edited(question, "@teleton_bot what is 3+3?"))
    assert "what is 3+3?" in asked[-1] and "Edited after you answered it" in asked[-1]
    assert len(requests(world, functions.messages.SendMessageRequest, GROUP)) == 1  # no second message
    (edit,) = requests(world, functions.messages.EditMessageRequest, GROUP)
    assert (edit.id, edit.message) == (reply_id, "Six.")  # the answer changed in place
    assert first.message == "Four."
    archived = await world.db.fetchone("select text from tg_messages where chat_id = ? and message_id = ?",
                                       (GROUP_ID, reply_id))  # fmt: skip
    assert archived[0] == "Six."
    assert await state(world, GROUP_ID, question.message.id) == "answered"


async def test_an_edit_after_the_window_is_only_archived(world: World) -> None:
    asked = answers(world, "Four.")
    question = new_message(GROUP, ALICE, "@teleton_bot what is 2+2?")
    await deliver(world, question)
    afterwards = world.gateway.handlers.afterwards
    assert afterwards is not None
    later = itertools.count(afterwards.clock() + afterwards.window_s + 1)
    afterwards.clock = lambda: float(next(later))  # the edit comes after the window

    await deliver(world, edited(question, "@teleton_bot what is 3+3?"))
    assert len(asked) == 1  # the model was not asked again
    assert requests(world, functions.messages.EditMessageRequest, GROUP) == []
    row = await world.db.fetchone("select text from tg_messages where chat_id = ? and message_id = ?",
                                  (GROUP_ID, question.message.id))  # fmt: skip
    assert row[0] == "@teleton_bot what is 3+3?"  # the archive keeps the latest words all the same


async def test_a_shorter_re_answer_replaces_a_long_answer_and_its_extra_message_goes(world: World) -> None:
    answers(world, LONG, "Short now.")
    question = new_message(ADMIN, ADMIN, "tell me everything")
    await deliver(world, question)
    sent = requests(world, functions.messages.SendMessageRequest, ADMIN)
    assert len(sent) == 2
    ids = [int(r[0]) for r in await world.db.fetchall(
        "select message_id from tg_messages where chat_id = ? and is_outgoing = 1 order by message_id", (ADMIN.id,)
    )]  # fmt: skip

    await deliver(world, edited(question, "tell me briefly"))
    (edit,) = requests(world, functions.messages.EditMessageRequest, ADMIN)
    assert (edit.id, edit.message) == (ids[0], "Short now.")
    assert deletions(world) == [[ids[1]]]
    assert len(requests(world, functions.messages.SendMessageRequest, ADMIN)) == 2  # nothing new was sent


async def test_a_question_deleted_soon_takes_its_answer_in_a_dm_but_not_in_a_group(world: World) -> None:
    answers(world, "Private answer.", "Group answer.")
    dm_question = new_message(ADMIN, ADMIN, "something I regret asking")
    await deliver(world, dm_question)
    group_question = new_message(GROUP, ALICE, "@teleton_bot a group question")
    await deliver(world, group_question)
    outgoing = dict(await world.db.fetchall("select chat_id, message_id from tg_messages where is_outgoing = 1"))

    await deliver(world, deleted(dm_question.message.id, group_question.message.id))
    assert deletions(world) == [[outgoing[ADMIN.id]]]  # the DM's answer went, the group's stayed
