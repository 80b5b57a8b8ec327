"""The world a streamed answer is tested in: real Telethon (the recording client: every request as Telethon
builds it), the real agent, the real ``openai`` SDK streaming from the scripted OpenAI-compatible server,
which writes a word at a time. Time is a clock the test owns: it moves a little at every look, and the
gateway's waits move it on, so what is asserted is the order and spacing of the changes by that clock,
never how long anything took.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from telethon import functions
from telethon.tl import types

from teleton.agent.runtime import Agent, AgentDeps, AgentSettings
from teleton.llm import LLMClient
from teleton.llm.openai_provider import OpenAIProvider
from teleton.privacy import Principals
from teleton.storage import Database
from teleton.telegram.gateway import TelegramGateway
from teleton.tools.families.telegram_actions import telegram_tools
from teleton.tools.outbox import Outbox
from teleton.tools.registry import ToolRegistry
from tests.agent.conftest import MAIN_MODEL, llm_settings
from tests.fakes.anthropic_server import Reply, text
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.conftest import ADMIN, GROUP, ME, RecordingClient, make_settings, new_message

ANSWER = " ".join(f"Word{i} of a long answer, written slowly." for i in range(60))  # ~2,500 characters
TICK = 0.05  # how far the test's clock moves at every look


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        self.now += TICK
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


@dataclass
class World:
    client: RecordingClient
    gateway: TelegramGateway
    fake: FakeOpenAI
    db: Database
    clock: Clock
    changes: list[tuple[str, float, Any]] = field(default_factory=list)  # (kind, clock, request) to the owner

    async def say(self, words: str) -> None:
        await deliver(self, new_message(ADMIN, ADMIN, words))

    def to_owner(self, kind: type) -> list[Any]:
        return [r for r in self.client.requests if isinstance(r, kind) and _peer_id(r) == ADMIN.id]


async def deliver(world: World, *updates: Any) -> None:
    """Updates as Telegram pushes them, one after the other; then everything they set off is finished."""
    for update in updates:
        await world.client._dispatch_update(update)
    await world.gateway.batcher.drain()
    assert world.gateway.dispatcher is not None
    await world.gateway.dispatcher.idle()
    await world.gateway.pipeline.settle()  # the gate's verdicts too, written with a later batch


def _peer_id(request: Any) -> int | None:
    return getattr(request.peer, "user_id", None)


async def make_world(
    tmp_path: Path, db: Database, fake: FakeOpenAI, *, first_id: int = 10_000, **settings: Any
) -> AsyncIterator[World]:
    """The daemon's Telegram side and agent; ``first_id``: the id of the first message it sends (a second
    world on the same database, the next start, must not hand out the ids the first one did)."""
    client, clock = RecordingClient(), Clock()
    client._ids = itertools.count(first_id)
    gateway = TelegramGateway(client, db, replace(make_settings(), **settings))
    gateway.set_me(ME)
    gateway.stream_clock = clock  # type: ignore[method-assign]
    gateway._sleep = clock.sleep
    llm = LLMClient(llm_settings(), provider=OpenAIProvider(api_key="test", base_url=fake.base_url), name="local")
    (tmp_path / "ws").mkdir(exist_ok=True)
    principals = Principals(owner_id=ADMIN.id)
    agent = Agent(
        AgentDeps(db=db, llm=llm, gateway=gateway, registry=ToolRegistry(telegram_tools()), workspace=tmp_path / "ws",
                  principals=principals, outbox=Outbox(db, gateway, principals)),
        AgentSettings(session_reset_hour=None, session_idle_minutes=None),
    )  # fmt: skip
    gateway.on_message(agent.handle)
    gateway.install()
    client.session.process_entities(
        types.contacts.ResolvedPeer(peer=types.PeerUser(ADMIN.id), chats=[GROUP], users=[ME, ADMIN])
    )
    world = World(client, gateway, fake, db, clock)

    def witness(request: Any) -> BaseException | None:
        if isinstance(request, (functions.messages.SendMessageRequest, functions.messages.EditMessageRequest)):
            if _peer_id(request) == ADMIN.id:
                world.changes.append((type(request).__name__, clock.now, request))
        return None

    client.fail_when = witness
    yield world
    await gateway.stop(grace_s=1)
    await llm.close()


def answered(fake: FakeOpenAI, *replies: Reply) -> None:
    """The main model's answers in order; the utility model's requests get "ok"."""
    queue = list(replies)
    fake.responder = lambda body: queue.pop(0) if body["model"] == MAIN_MODEL and queue else text("ok")


async def assert_settled(db: Database) -> None:
    row = await db.fetchone("select agent_state from tg_messages where chat_id = ? and is_outgoing = 0", (ADMIN.id,))
    assert row[0] == "answered"
    assert (await db.fetchone("select count(*) from reply_sends"))[0] == 0
