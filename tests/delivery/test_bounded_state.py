"""Per-chat state is bounded (docs/operations.md: a month of traffic from 20,000 chats keeps memory flat): rate-limit
windows, per-chat locks, the dispatcher's context buffers and finished keys, the agent's and the distiller's
locks are all released once their chats go quiet."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import UTC, datetime
from pathlib import Path

from telethon.tl import types

from teleton.agent.distiller import Distiller
from teleton.agent.locks import KeyedLocks
from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.memory.facts.store import FactStore
from teleton.storage import Database
from teleton.telegram.receive.dispatch import CONTEXT_CAP, CONTEXT_CHATS, FINISHED_KEPT
from teleton.telegram.receive.ratelimit import PRUNE_EVERY, WINDOW_S, RateLimiter
from tests.agent.conftest import build_harness
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, tool_use, user_said
from tests.telegram.conftest import ALICE, make_harness, make_settings
from tests.waiting import until


def test_rate_limit_windows_of_quiet_chats_are_dropped() -> None:
    now = [0.0]
    limiter = RateLimiter(per_chat=5, global_=1_000_000, clock=lambda: now[0])
    for chat_id in range(12_000):
        assert limiter.allow(chat_id) is None
    assert limiter.tracked_chats == 12_000
    now[0] += WINDOW_S + 1  # a minute later: every one of those windows is empty
    for _ in range(PRUNE_EVERY):  # ordinary traffic from one chat prunes them on its way
        limiter.allow(1)
    assert limiter.tracked_chats <= 1
    assert limiter.allow(99_999) is None and limiter.tracked_chats <= 2


async def test_keyed_locks_forget_every_key_once_released() -> None:
    locks = KeyedLocks()
    for key in range(10_000):
        async with locks.hold(key):
            assert len(locks) == 1
    assert len(locks) == 0

    # Contended, and with a waiter cancelled while it waits: nothing is left behind either.
    order: list[str] = []

    async def turn(name: str, key: int) -> None:
        async with locks.hold(key):
            order.append(name)
            await asyncio.sleep(0)

    async with locks.hold(7):
        waiting = [asyncio.create_task(turn(f"t{i}", 7)) for i in range(5)]
        cancelled = asyncio.create_task(turn("cancelled", 7))
        for _ in range(5):
            await asyncio.sleep(0)
        cancelled.cancel()
    await asyncio.gather(*waiting, cancelled, return_exceptions=True)
    assert order == [f"t{i}" for i in range(5)]
    assert len(locks) == 0


def _group(chat_id: int) -> types.Chat:
    return types.Chat(id=chat_id, title=f"g{chat_id}", photo=types.ChatPhotoEmpty(), participants_count=3, date=None,
                      version=1)  # fmt: skip


def _unaddressed(chat: types.Chat, message_id: int) -> types.UpdateNewMessage:
    msg = types.Message(
        id=message_id, peer_id=types.PeerChat(chat.id), date=datetime.now(UTC), message=f"chatter {message_id}",
        from_id=types.PeerUser(ALICE.id),
    )  # fmt: skip
    update = types.UpdateNewMessage(message=msg, pts=1, pts_count=1)
    update._entities = {-chat.id: chat, ALICE.id: ALICE}
    return update


async def test_context_buffers_of_unaddressed_group_chatter_are_capped(db: Database) -> None:
    h = await make_harness(db, require_mention=True)
    dispatcher = h.gateway.dispatcher
    assert dispatcher is not None
    chats = CONTEXT_CHATS + 150
    try:
        ids = itertools.count(1)
        for chat_id in range(1, chats + 1):  # chatter nobody addressed us in, from more chats than are kept
            await h.dispatch(_unaddressed(_group(chat_id), next(ids)))
        busiest = _group(1)  # and one chat that talks far more than a buffer holds
        for _ in range(CONTEXT_CAP * 2):
            await h.dispatch(_unaddressed(busiest, next(ids)))
        await h.settle()
        assert dispatcher.decisions["not addressed"] >= chats
        assert len(dispatcher._context) == CONTEXT_CHATS  # the least recently active chats were dropped
        assert len(dispatcher.pending_context(-1)) == CONTEXT_CAP
        assert dispatcher.pending_context(-2) == []  # the oldest quiet chat is forgotten
        assert len(dispatcher.pending_context(-chats)) == 1  # a recent one is kept
        assert h.agent.seen == []  # none of it reached the agent
    finally:
        await h.gateway.stop(grace_s=1)


async def test_finished_turn_keys_are_capped() -> None:
    done: list[int] = []

    async def agent(msg: IncomingMessage) -> None:
        done.append(msg.message_id)

    dispatcher = make_settings(rate_limit_per_chat=10**9, rate_limit_global=10**9).dispatcher(agent, me_id=lambda: 1)
    turns = FINISHED_KEPT + 500
    for message_id in range(1, turns + 1):
        chat_id = 10 + message_id % 40
        msg = IncomingMessage(
            chat=ChatInfo(id=chat_id, type="dm"), sender=UserInfo(id=chat_id, first_name="u"),
            message_id=message_id, text="hi", date=time.time(),
        )  # fmt: skip
        assert dispatcher.offer(msg).accept
        if message_id % 1000 == 0:
            await dispatcher.idle()
    await dispatcher.idle()
    await dispatcher.close(grace_s=1)
    assert len(done) == turns
    assert len(dispatcher._finished) == FINISHED_KEPT and not dispatcher._inflight


def _utility(body: Body) -> Reply:
    said = user_said(body)
    if "Extract the durable facts" in said or "Exchange in" in said:
        return tool_use(("record_facts", {"facts": [{"content": f"Fact {hash(said) % 997}", "category": "misc",
                                                    "importance": 0.5}]}))  # fmt: skip
    return text("summary")


async def test_agent_and_distiller_locks_are_empty_after_many_chats(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    h = await build_harness(tmp_path, db, fake_api)
    distiller = Distiller(h.llm, FactStore(db))
    h.agent.deps.distiller = distiller
    h.utility = _utility
    h.main = lambda body: text("noted")
    try:
        users = [UserInfo(id=70_000 + i, first_name=f"user{i}") for i in range(60)]
        replies = await asyncio.gather(*(h.dm(f"hello from {u.first_name}", sender=u) for u in users))
        assert replies == ["noted"] * len(users)
        await distiller.drain()
        await until(lambda: not distiller._tasks)
    finally:
        await h.llm.close()
    assert len(h.agent.locks) == 0 and not h.agent.running
    assert len(distiller._locks) == 0
    assert (await db.fetchone("select count(*) from facts"))[0] > 0  # the distiller did commit
