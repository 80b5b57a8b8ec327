"""Fixtures of the tool tests: a workspace, tool contexts as the agent builds them, and a real Telethon gateway
whose client records the TL requests instead of sending them (TESTING.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from telethon import TelegramClient, functions, types
from telethon.sessions import MemorySession

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.llm.tool_loop import ToolCall, ToolResult
from teleton.privacy import Principals
from teleton.storage import Database
from teleton.storage.workspace_template import create_workspace
from teleton.tools.registry import ToolContext, ToolDeps, ToolRegistry

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


class RecordingClient(TelegramClient):
    """A real, unconnected TelegramClient: Telethon builds every request; ``_call`` records it and answers."""

    def __init__(self) -> None:
        super().__init__(MemorySession(), 1, "0" * 32)
        self.requests: list[Any] = []
        self.next_id = 500
        self.answers: dict[type, Any] = {}  # request type -> fn(request) -> TL result, for one test

    def _new_message(self, request: Any, now: dt.datetime) -> Any:
        """What Telegram answers to a send: the new message and the random_id it was sent with."""
        random_ids = request.random_id if isinstance(request.random_id, list) else [request.random_id]
        updates: list[Any] = []
        target = getattr(request, "peer", None) or request.to_peer
        in_group = isinstance(target, types.InputPeerChannel)
        peer = types.PeerChannel(SUPERGROUP.id) if in_group else types.PeerUser(BOB.id)
        for random_id in random_ids:
            self.next_id += 1
            updates.append(types.UpdateMessageID(id=self.next_id, random_id=random_id))
            message = types.Message(id=self.next_id, peer_id=peer, date=now, message="", out=True)
            updates.append(
                types.UpdateNewChannelMessage(message, pts=1, pts_count=1)
                if isinstance(peer, types.PeerChannel)
                else types.UpdateNewMessage(message, 1, 1)
            )
        return types.Updates(updates=updates, users=[BOB], chats=[SUPERGROUP], date=now, seq=0)

    async def _call(self, sender: Any, request: Any, ordered: bool = False, flood_sleep_threshold: Any = None) -> Any:
        if isinstance(request, list):  # Telethon sends chunked requests as one list
            return [await self._call(sender, r, ordered, flood_sleep_threshold) for r in request]
        self.requests.append(request)
        now = dt.datetime.now(dt.UTC)
        if isinstance(request, functions.messages.SendMessageRequest):
            self.next_id += 1
            return types.UpdateShortSentMessage(id=self.next_id, pts=1, pts_count=1, date=now)
        if isinstance(request, functions.users.GetUsersRequest):
            return [BOB]
        if isinstance(request, functions.messages.SendMediaRequest | functions.messages.ForwardMessagesRequest):
            return self._new_message(request, now)
        if isinstance(request, functions.upload.SaveFilePartRequest):
            return True
        if isinstance(request, functions.channels.GetChannelsRequest):
            return types.messages.Chats(chats=[SUPERGROUP])
        if isinstance(request, functions.contacts.ResolveUsernameRequest):
            return types.contacts.ResolvedPeer(peer=types.PeerUser(BOB.id), chats=[], users=[BOB])
        if self.answers.get(type(request)) is not None:
            return self.answers[type(request)](request)
        return types.Updates(updates=[], users=[], chats=[], date=now, seq=0)

    def sent(self, kind: type) -> list[Any]:
        return [r for r in self.requests if isinstance(r, kind)]


@pytest.fixture
async def telegram(db: Database) -> AsyncIterator[tuple[Any, RecordingClient]]:
    """(TelegramGateway, its recording client) with Bob and the two groups in the entity cache."""
    from teleton.telegram.gateway import TelegramGateway

    client = RecordingClient()
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
