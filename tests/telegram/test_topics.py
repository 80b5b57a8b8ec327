"""A forum's topics are separate conversations: real Telethon TL updates through an unconnected client, the
real agent, the real ``openai`` SDK against the scripted server on 127.0.0.1.

Two topics of one forum, their messages interleaved: each keeps its own session and its own unanswered
context, a reply lands in the topic it answers (``top_msg_id``, every part), and ``/new`` in one topic leaves
the other's session alone. Topic creation, renaming and closing are archived as events in words.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from telethon import functions, utils
from telethon.tl import types

from teleton.agent.prompt.memory import FEED_HEADER
from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.llm.tool_loop import ToolCall
from teleton.privacy import Clearance
from teleton.privacy.labels import group_label
from teleton.scheduler.task_store import TaskStore
from teleton.storage import Database
from teleton.telegram import convert
from teleton.telegram.send.sending import reply_header
from teleton.tools.families.tasks import task_tools
from teleton.tools.registry import ToolContext, ToolRegistry
from tests.agent.conftest import MAIN_MODEL
from tests.fakes.anthropic_server import Reply, text
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.conftest import ADMIN, ALICE, attach, next_id
from tests.telegram.stream_world import World, deliver, make_world

FORUM = types.Channel(
    id=900, title="Makers", photo=types.ChatPhotoEmpty(), date=None, megagroup=True, forum=True, access_hash=99
)
FORUM_ID = utils.get_peer_id(FORUM)
GARDEN, BIKES = 100_000, 200_000  # the topics' top messages (ids apart from next_id's)


@pytest.fixture
async def world(tmp_path: Path, db: Database, fake_openai: FakeOpenAI) -> AsyncIterator[World]:
    async for made in make_world(tmp_path, db, fake_openai):
        yield made


def in_topic(topic: int, sender: Any, words: str, *, reply_to: int | None = None, msg_id: int | None = None) -> Any:
    """A message written in ``topic``, as Telegram delivers it: the header names the topic (as
    ``reply_to_top_id`` when it also answers someone there)."""
    header = (
        types.MessageReplyHeader(forum_topic=True, reply_to_msg_id=reply_to, reply_to_top_id=topic)
        if reply_to
        else types.MessageReplyHeader(forum_topic=True, reply_to_msg_id=topic)
    )
    message = types.Message(
        id=msg_id or next_id(), peer_id=types.PeerChannel(FORUM.id), date=datetime.now(UTC), message=words,
        from_id=types.PeerUser(sender.id), reply_to=header,
    )  # fmt: skip
    return attach(types.UpdateNewChannelMessage(message=message, pts=1, pts_count=1), FORUM, sender)


def service(action: Any, msg_id: int, *, topic: int | None = None) -> Any:
    header = types.MessageReplyHeader(forum_topic=True, reply_to_msg_id=topic) if topic else None
    message = types.MessageService(
        id=msg_id, peer_id=types.PeerChannel(FORUM.id), date=datetime.now(UTC), action=action,
        from_id=types.PeerUser(ADMIN.id), reply_to=header,
    )  # fmt: skip
    return attach(types.UpdateNewChannelMessage(message=message, pts=1, pts_count=1), FORUM, ADMIN)


def echo_what_it_saw(body: dict[str, Any]) -> Reply:
    """The main model answers with what each user message of its conversation said (the session and the
    unanswered talk riding along; not the retrieved-memory blocks), so a reply shows which context it had."""
    if body["model"] != MAIN_MODEL:
        return text("ok")
    said = [m["content"] if isinstance(m["content"], str) else m["content"][-1]["text"] for m in body["messages"]
            if m["role"] == "user"]  # fmt: skip
    return text(" | ".join(conversation(s) for s in said))


def conversation(said: str) -> str:
    """A user message without the retrieved-memory blocks in front of it."""
    return "\n\n".join(part for part in said.split("\n\n") if not part.startswith("[Relevant "))


def memory_block(body: dict[str, Any]) -> list[str]:
    """The lines of the retrieved-messages block the model was shown with the last user message."""
    last = body["messages"][-1]["content"]
    said = last if isinstance(last, str) else "\n\n".join(b["text"] for b in last if b.get("type") == "text")
    blocks = [part for part in said.split("\n\n") if part.startswith(FEED_HEADER)]
    return blocks[0].splitlines()[1:] if blocks else []


async def topic_of_rows(db: Database, topic: int) -> list[str]:
    rows = await db.fetchall(
        "select text from tg_messages where chat_id = ? and topic_id = ? order by id", (FORUM_ID, topic)
    )
    return [r[0] for r in rows]


def replies(world: World) -> list[functions.messages.SendMessageRequest]:
    return [r for r in world.client.sent() if utils.get_peer_id(r.peer) == FORUM_ID]


async def test_two_topics_keep_separate_contexts_sessions_and_replies(world: World, tmp_path: Path) -> None:
    world.fake.responder = echo_what_it_saw
    await deliver(world, service(types.MessageActionTopicCreate(title="Garden", icon_color=1), GARDEN))
    await deliver(world, service(types.MessageActionTopicCreate(title="Bikes", icon_color=2), BIKES))
    garden_q = in_topic(GARDEN, ALICE, "@teleton_bot our tomatoes are splitting")
    await deliver(world, garden_q)
    bikes_q = in_topic(BIKES, ALICE, "@teleton_bot my chain keeps slipping")
    await deliver(world, bikes_q)
    # Unaddressed talk in each topic, interleaved: each rides along only with its own topic's next turn.
    await deliver(
        world, in_topic(GARDEN, ADMIN, "water them less often"), in_topic(BIKES, ADMIN, "check the derailleur")
    )
    await deliver(world, in_topic(GARDEN, ALICE, "@teleton_bot and the basil?"))
    await deliver(world, in_topic(BIKES, ALICE, "@teleton_bot and the brakes?", reply_to=bikes_q.message.id))

    sent = replies(world)
    assert len(sent) == 4
    garden_second, bikes_second = sent[2].message, sent[3].message
    assert "tomatoes" in garden_second and "water them less often" in garden_second and "basil" in garden_second
    assert "chain" not in garden_second and "derailleur" not in garden_second and "brakes" not in garden_second
    assert "chain" in bikes_second and "derailleur" in bikes_second and "brakes" in bikes_second
    assert "tomatoes" not in bikes_second and "water them" not in bikes_second
    # Each reply lands in its topic, answering the message it answers.
    landed = [(r.reply_to.reply_to_msg_id, r.reply_to.top_msg_id) for r in sent]
    assert landed[0] == (garden_q.message.id, GARDEN) and landed[1] == (bikes_q.message.id, BIKES)
    assert [top for _, top in landed] == [GARDEN, BIKES, GARDEN, BIKES]

    sessions = await world.db.fetchall(
        "select topic_id, messages_json from sessions where chat_id = ? and active = 1 order by topic_id", (FORUM_ID,)
    )
    assert [r[0] for r in sessions] == [GARDEN, BIKES]  # one conversation per topic
    assert "chain" not in sessions[0][1] and "tomatoes" not in sessions[1][1]
    # The archive says which topic each message (ours included) was in; the creation is archived in words.
    assert (await topic_of_rows(world.db, GARDEN))[0] == "Ada created the topic “Garden”"
    assert sum("chain" in t for t in await topic_of_rows(world.db, BIKES)) >= 2  # the question and our answer
    # The daily log's lines say which topic each exchange was in.
    log_lines = "".join(p.read_text() for p in (tmp_path / "ws" / "memory").glob("*.md")).splitlines()
    assert any(f"topic {GARDEN}" in line for line in log_lines if "tomatoes" in line)
    assert any(f"topic {BIKES}" in line for line in log_lines if "chain keeps slipping" in line)


async def test_retrieval_shows_the_topics_own_messages_first_and_marks_the_others(world: World) -> None:
    world.fake.responder = echo_what_it_saw
    await deliver(world, in_topic(BIKES, ALICE, "@teleton_bot the tomato stakes make good bike stands"))
    await deliver(world, in_topic(GARDEN, ALICE, "@teleton_bot tomato plants need stakes"))
    await deliver(world, in_topic(GARDEN, ALICE, "@teleton_bot what about tomato stakes then?"))
    asked = [b for b in world.fake.requests if b["model"] == MAIN_MODEL][-1]
    lines = memory_block(asked)
    assert any("tomato plants need stakes" in line and "another topic" not in line for line in lines)
    assert any("bike stands" in line for line in lines)  # the same chat's other topic is still found ...
    assert all("(in another topic)" in line for line in lines if "bike stands" in line)  # ... and marked
    marked = ["(in another topic)" in line for line in lines]
    assert marked == sorted(marked)  # the topic's own lines first


async def test_new_in_one_topic_leaves_the_other_topics_session_alone(world: World) -> None:
    world.fake.responder = echo_what_it_saw
    await deliver(world, in_topic(GARDEN, ADMIN, "@teleton_bot remember: the shed key is under the pot"))
    await deliver(world, in_topic(BIKES, ADMIN, "@teleton_bot remember: the pump is in the hall"))
    before = dict(
        await world.db.fetchall("select topic_id, id from sessions where chat_id = ? and active = 1", (FORUM_ID,))
    )
    await deliver(world, in_topic(GARDEN, ADMIN, "/new@teleton_bot"))
    after = dict(
        await world.db.fetchall("select topic_id, id from sessions where chat_id = ? and active = 1", (FORUM_ID,))
    )
    assert after.get(BIKES) == before[BIKES]  # untouched
    assert after.get(GARDEN) != before[GARDEN]  # the garden topic starts afresh (or has no session yet)
    assert replies(world)[-1].reply_to.top_msg_id == GARDEN  # /new answered in its own topic
    await deliver(world, in_topic(BIKES, ADMIN, "@teleton_bot where is the pump?"))
    assert "the pump is in the hall" in replies(world)[-1].message  # its conversation goes on


async def test_topic_renamed_and_closed_are_archived_in_words(world: World) -> None:
    await deliver(world, service(types.MessageActionTopicEdit(title="Vegetables"), next_id(), topic=GARDEN))
    await deliver(world, service(types.MessageActionTopicEdit(closed=True), next_id(), topic=GARDEN))
    await deliver(world, service(types.MessageActionTopicEdit(closed=False), next_id(), topic=GARDEN))
    assert await topic_of_rows(world.db, GARDEN) == [
        "Ada renamed the topic to “Vegetables”",
        "Ada closed the topic",
        "Ada reopened the topic",
    ]
    assert replies(world) == []  # events, not messages to answer


def test_a_topic_message_is_not_a_reply_and_a_reply_in_a_topic_is() -> None:
    plain = in_topic(GARDEN, ALICE, "hello").message
    answer = in_topic(GARDEN, ALICE, "hello", reply_to=42).message
    general = types.Message(id=5, peer_id=types.PeerChannel(FORUM.id), date=None, message="hi")
    assert (convert.topic_of(plain), convert.reply_to_id(plain)) == (GARDEN, None)
    assert (convert.topic_of(answer), convert.reply_to_id(answer)) == (GARDEN, 42)
    assert (convert.topic_of(general), convert.reply_to_id(general)) == (None, None)  # the General topic


def test_where_a_message_lands() -> None:
    assert reply_header(None, None) is None
    assert reply_header(7, None) == types.InputReplyToMessage(reply_to_msg_id=7)
    assert reply_header(None, GARDEN) == types.InputReplyToMessage(reply_to_msg_id=GARDEN)  # posted in the topic
    assert reply_header(7, GARDEN) == types.InputReplyToMessage(reply_to_msg_id=7, top_msg_id=GARDEN)
    assert reply_header(GARDEN, GARDEN) == types.InputReplyToMessage(reply_to_msg_id=GARDEN)


async def test_a_task_scheduled_in_a_topic_reports_in_that_topic(world: World) -> None:
    world.fake.responder = lambda body: text("Time to water the tomatoes.") if body["model"] == MAIN_MODEL else text("")
    world.client.session.process_entities(
        types.contacts.ResolvedPeer(peer=types.PeerChannel(FORUM.id), chats=[FORUM], users=[])
    )  # the forum is known, as after any message from it
    assert world.gateway.dispatcher is not None
    agent = world.gateway.dispatcher.handler.__self__  # type: ignore[attr-defined]  # the agent's handle
    forum = ChatInfo(id=FORUM_ID, type="group", title="Makers")
    clearance = Clearance(group_label(FORUM_ID))
    ctx = ToolContext(chat=forum, sender=UserInfo(id=ADMIN.id), is_admin=True, clearance=clearance,
                      deps=agent.tool_deps, topic_id=GARDEN)  # fmt: skip
    call = ToolCall("t1", "schedule_task", {"description": "remind to water", "prompt": "remind me to water",
                                            "delay_minutes": 1})  # fmt: skip
    result = await ToolRegistry(task_tools()).execute(call, ctx)
    assert not result.is_error, result.content
    (task,) = await TaskStore(world.db).list([FORUM_ID])
    assert task.topic_id == GARDEN
    await agent.scheduled.run_task(task, "remind me to water")
    (sent,) = replies(world)
    assert sent.message == "Time to water the tomatoes." and sent.reply_to.reply_to_msg_id == GARDEN  # in the topic
