"""Fixtures of the tool tests: a workspace, tool contexts as the agent builds them, and a real Telethon gateway
whose client records the TL requests instead of sending them (TESTING.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from telethon import functions, types

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.llm.tool_loop import ToolCall, ToolResult
from teleton.privacy import Principals
from teleton.storage import Database
from teleton.storage.workspace_template import create_workspace
from teleton.tools.registry import ToolContext, ToolDeps, ToolRegistry
from tests.fakes.telegram_client import RecordingClient

OWNER = UserInfo(id=1000, first_name="Owner")
STRANGER = UserInfo(id=2000, first_name="Stranger")
DM = ChatInfo(id=1000, type="dm", title="Owner")
GROUP = ChatInfo(id=-1001234567890, type="group", title="Hikers")  # a supergroup
OTHER_GROUP = ChatInfo(id=-888, type="group", title="Other")
BOB = types.User(id=42, access_hash=4242, first_name="Bob", username="bob")
BOB_DM = ChatInfo(id=42, type="dm", title="Bob")


SUPERGROUP = types.Channel(
    id=1234567890,
    title=GROUP.title,
    photo=types.ChatPhotoEmpty(),
    date=dt.datetime.now(),
    access_hash=777,
    megagroup=True,
)
BASIC_GROUP = types.Chat(
    id=888,
    title=OTHER_GROUP.title,
    photo=types.ChatPhotoEmpty(),
    participants_count=3,
    date=dt.datetime.now(),
    version=1,
)


def make_ctx(deps: ToolDeps, chat: ChatInfo, *, admin: bool, message_id: int | None = 10) -> ToolContext:
    """A turn in ``chat``: its clearance is the chat's (the owner's DM reads everything), ``admin`` its rights."""
    return ToolContext(
        chat=chat,
        sender=OWNER if admin else STRANGER,
        is_admin=admin,
        clearance=deps.principals.clearance(chat.id),
        deps=deps,
        message_id=message_id,
    )


async def call(registry: ToolRegistry, ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    """Through the registry's one door, as the tool loop does."""
    return await registry.execute(ToolCall(id="t1", name=name, input=args), ctx)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    create_workspace(ws)
    return ws


@pytest.fixture
def deps(db: Database, workspace: Path) -> ToolDeps:
    return ToolDeps(db=db, workspace=workspace, principals=principals())


def principals() -> Principals:
    """OWNER is the owner: their DM (chat 1000) has the owner's clearance; any other chat its own."""
    return Principals(owner_id=OWNER.id)


def recording_client() -> RecordingClient:
    """The suite's recording client (``tests/fakes/telegram_client.py``) in this suite's world: the account's
    users are Bob, its channel the supergroup, any @username Bob; a request nothing answers gets empty updates."""
    client = RecordingClient()
    client.answers.update({
        functions.users.GetUsersRequest: lambda r: [BOB],
        functions.channels.GetChannelsRequest: lambda r: types.messages.Chats(chats=[SUPERGROUP]),
        functions.contacts.ResolveUsernameRequest: lambda r: types.contacts.ResolvedPeer(
            peer=types.PeerUser(BOB.id), chats=[], users=[BOB]
        ),
    })  # fmt: skip
    client.otherwise = lambda r: types.Updates(updates=[], users=[], chats=[], date=dt.datetime.now(dt.UTC), seq=0)
    return client


@pytest.fixture
async def telegram(db: Database) -> AsyncIterator[tuple[Any, RecordingClient]]:
    """(TelegramGateway, its recording client) with Bob and the two groups in the entity cache."""
    from teleton.telegram.gateway import TelegramGateway

    client = recording_client()
    groups = [SUPERGROUP, BASIC_GROUP]
    owner = types.User(id=OWNER.id, access_hash=1, first_name="Owner")
    client.session.process_entities(
        types.contacts.ResolvedPeer(peer=types.PeerUser(BOB.id), chats=groups, users=[BOB, owner])
    )
    gateway = TelegramGateway(client, db)
    me = types.User(id=1, access_hash=1, first_name="Teleton")
    me.is_self = True
    gateway.set_me(me)
    yield gateway, client
    await gateway.batcher.close()


@pytest.fixture(scope="session")
def embedder() -> Any:
    """The real default embedding model (multilingual-e5-small, from the run's model cache), loaded once."""
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.packaged import packaged_model

    model = LocalEmbedder(packaged_model())
    yield model
    model.close()
