"""Channels: a post is archived at the channel's own label (the owner finds it, a group does not), and the
owner's agent posts and edits posts there only with the owner's approval of the exact words. Real Telethon
TL updates through an unconnected client, the real agent, the real ``openai`` SDK against the scripted
server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from telethon import functions, utils

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.llm.tool_loop import ToolCall
from teleton.privacy import Clearance
from teleton.privacy.labels import group_label
from teleton.storage import Database
from teleton.tools.registry import ToolContext
from tests.agent.conftest import MAIN_MODEL
from tests.fakes.anthropic_server import Reply, text, tool_use
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.conftest import ADMIN, ALICE, CHANNEL, GROUP, new_message
from tests.telegram.stream_world import World, deliver, make_world

CHANNEL_ID, GROUP_ID = utils.get_peer_id(CHANNEL), utils.get_peer_id(GROUP)


@pytest.fixture
async def world(tmp_path: Path, db: Database, fake_openai: FakeOpenAI) -> AsyncIterator[World]:
    async for made in make_world(tmp_path, db, fake_openai, stream_edits=False):
        yield made


def calls(world: World, name: str, args: dict[str, Any]) -> None:
    """The main model makes one tool call when asked to, then says it is done."""

    def respond(body: dict[str, Any]) -> Reply:
        if body["model"] != MAIN_MODEL:
            return text("ok")
        last = body["messages"][-1]
        return tool_use((name, args)) if last["role"] == "user" and "please" in str(last["content"]) else text("Done.")

    world.fake.responder = respond


def agent_of(world: World) -> Any:
    assert world.gateway.dispatcher is not None
    return world.gateway.dispatcher.handler.__self__  # type: ignore[attr-defined]  # the agent's handle


def context(world: World, chat: ChatInfo, clearance: Clearance, sender: int) -> ToolContext:
    return ToolContext(chat=chat, sender=UserInfo(id=sender), is_admin=True, clearance=clearance,
                       deps=agent_of(world).tool_deps)  # fmt: skip


async def approve(world: World) -> None:
    """The owner approves the held item with the code its notice showed."""
    digest = (await world.db.fetchone("select digest from pending_sends order by id desc limit 1"))[0]
    item = (await world.db.fetchone("select id from pending_sends order by id desc limit 1"))[0]
    await deliver(world, new_message(ADMIN, ADMIN, f"/approve {item} {digest[:8]}"))


def to_channel(world: World, kind: type) -> list[Any]:
    return [r for r in world.client.requests if isinstance(r, kind) and utils.get_peer_id(r.peer) == CHANNEL_ID]


async def test_a_channel_post_is_archived_at_its_own_label_for_the_owner_only(world: World) -> None:
    await deliver(world, new_message(CHANNEL, None, "Release 2.0 of the garden planner is out", post=True))
    row = await world.db.fetchone(
        "select m.agent_state, c.type from tg_messages m join tg_chats c on c.id = m.chat_id where m.chat_id = ?",
        (CHANNEL_ID,),
    )
    assert tuple(row) == ("ignored", "channel")  # archived, never answered
    assert world.client.sent() == []
    agent = agent_of(world)
    assert agent.principals.chat_label(CHANNEL_ID) == group_label(CHANNEL_ID)  # its own label, not public
    search = ToolCall("s", "search_messages", {"query": "garden planner release"})
    owner = context(world, ChatInfo(ADMIN.id, "dm"), Clearance("owner"), ADMIN.id)
    found = await agent.deps.registry.execute(search, owner)
    assert "Release 2.0 of the garden planner is out" in found.content
    group = context(world, ChatInfo(GROUP_ID, "group"), Clearance(group_label(GROUP_ID)), ALICE.id)
    assert "Release 2.0" not in (await agent.deps.registry.execute(search, group)).content


async def test_the_owner_posts_to_a_channel_only_after_approving_the_words(world: World) -> None:
    await deliver(world, new_message(CHANNEL, None, "An earlier post", post=True))  # the channel is known
    calls(world, "post_to_channel", {"chat_id": CHANNEL_ID, "text": "Planting day is Saturday!"})
    await deliver(world, new_message(ADMIN, ADMIN, "please announce planting day on my channel"))
    assert to_channel(world, functions.messages.SendMessageRequest) == []  # held, not sent
    notice = [r.message for r in world.client.sent() if utils.get_peer_id(r.peer) == ADMIN.id]
    assert any("Planting day is Saturday!" in m for m in notice)  # the owner sees exactly the words
    await approve(world)
    (post,) = to_channel(world, functions.messages.SendMessageRequest)
    assert post.message == "Planting day is Saturday!"


async def test_the_owner_edits_a_channel_post_only_after_approving_the_new_words(world: World) -> None:
    post = new_message(CHANNEL, None, "Planting day is Saturday!", post=True)
    await deliver(world, post)
    args = {"chat_id": CHANNEL_ID, "message_id": post.message.id, "text": "Planting day moves to Sunday!"}
    calls(world, "edit_channel_post", args)
    await deliver(world, new_message(ADMIN, ADMIN, "please fix the planting day post"))
    assert to_channel(world, functions.messages.EditMessageRequest) == []
    await approve(world)
    (edit,) = to_channel(world, functions.messages.EditMessageRequest)
    assert (edit.id, edit.message) == (post.message.id, "Planting day moves to Sunday!")


async def test_channel_tools_are_the_owners_alone(world: World) -> None:
    await deliver(world, new_message(CHANNEL, None, "A post", post=True))
    agent = agent_of(world)
    post = ToolCall("p", "post_to_channel", {"chat_id": CHANNEL_ID, "text": "spam"})
    group = context(world, ChatInfo(GROUP_ID, "group"), Clearance(group_label(GROUP_ID)), ADMIN.id)
    dm = context(world, ChatInfo(ALICE.id, "dm"), Clearance(f"user:{ALICE.id}"), ALICE.id)
    for ctx in (group, dm):  # an admin in a group, another person's DM
        assert "post_to_channel" not in {t["name"] for t in agent.deps.registry.schemas(ctx.chat, True)}
        result = await agent.deps.registry.execute(post, ctx)
        assert result.is_error
    assert (await world.db.fetchone("select count(*) from pending_sends"))[0] == 0
    assert to_channel(world, functions.messages.SendMessageRequest) == []
    # Not a channel: a group is send_message's, not a channel tool's.
    owner = context(world, ChatInfo(ADMIN.id, "dm"), Clearance("owner"), ADMIN.id)
    wrong = ToolCall("w", "post_to_channel", {"chat_id": GROUP_ID, "text": "hello"})
    assert "is not a channel" in (await agent.deps.registry.execute(wrong, owner)).content
