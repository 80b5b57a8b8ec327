"""The per-chat lanes and group debounce on their own clock: no Telethon needed."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from structlog.testing import capture_logs

from teleton.gateway.contract import ChatInfo, IncomingMessage, TurnDeferred, UserInfo
from teleton.telegram.receive.dispatch import DebounceConfig, Dispatcher, Gate
from teleton.telegram.receive.policy import PolicyConfig
from teleton.telegram.receive.policy_control import GatePolicy
from teleton.telegram.receive.ratelimit import RateLimiter
from tests.waiting import until

GROUP = ChatInfo(id=-5, type="group", title="g")
ALICE = UserInfo(id=7, first_name="Alice")


def msg(i: int, *, mention: bool = True) -> IncomingMessage:
    return IncomingMessage(chat=GROUP, sender=ALICE, message_id=i, text=f"m{i}", date=time.time(), mentions_us=mention)


def handed_over(turns: list[IncomingMessage]) -> list[int]:
    """Every message the agent got, in the order it got them (a turn's earlier context, then its message)."""
    return [m.message_id for turn in turns for m in (*turn.earlier_context, turn)]


def dispatcher(turns: list[IncomingMessage], debounce: DebounceConfig) -> Dispatcher:
    async def handler(m: IncomingMessage) -> None:
        turns.append(m)

    return Dispatcher(
        handler=handler,
        gate=Gate(PolicyConfig.build(group_policy="open"), RateLimiter(1000, 1000)),
        debounce=debounce,
    )


async def test_debounce_waits_for_quiet_but_never_longer_than_the_cap() -> None:
    turns: list[IncomingMessage] = []
    d = dispatcher(turns, DebounceConfig(window_s=0.1, max_factor=3, max_messages=100))
    for i in range(3):  # a burst inside the window: collected until quiet, then one turn
        d.offer(msg(i))
    await d.idle()
    assert len(turns) == 1 and handed_over(turns) == [0, 1, 2]
    turns.clear()
    for i in range(3, 13):  # a message every 60 ms (or later, on a busy machine) keeps resetting the window
        d.offer(msg(i))
        await asyncio.sleep(0.06)
    await d.idle()
    # The burst lasts at least 9 x 60 ms, longer than the cap of 3 x 100 ms: its first turn was cut before
    # the burst ended (how many turns it took depends on the machine's pace, so only that is asserted) ...
    assert len(turns) >= 2
    assert handed_over(turns) == list(range(3, 13))  # ... and every message reached the agent once, in order
    await d.close()


async def test_debounce_stops_collecting_at_max_messages() -> None:
    turns: list[IncomingMessage] = []
    d = dispatcher(turns, DebounceConfig(window_s=1.0, max_factor=3, max_messages=5))
    for i in range(12):
        d.offer(msg(i))
    await d.idle()
    assert [len(m.earlier_context) + 1 for m in turns][:2] == [5, 5]
    await d.close()


async def test_a_failing_turn_is_counted_and_the_lane_goes_on() -> None:
    seen: list[int] = []

    async def handler(m: IncomingMessage) -> None:
        seen.append(m.message_id)
        if m.message_id == 1:
            raise RuntimeError("model exploded")

    d = Dispatcher(
        handler=handler,
        gate=Gate(PolicyConfig.build(dm_policy="open"), RateLimiter(100, 100)),
        debounce=DebounceConfig(window_s=0),
    )
    dm = ChatInfo(id=7, type="dm")
    for i in (1, 2):
        d.offer(IncomingMessage(chat=dm, sender=ALICE, message_id=i, text="x", date=time.time()))
    await d.idle()
    assert seen == [1, 2] and d.failures == 1 and d.turns == 1
    await d.close()


async def test_close_cancels_a_stuck_turn_within_the_grace_period() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def handler(m: IncomingMessage) -> None:
        started.set()
        try:
            await asyncio.Event().wait()  # stuck for good: only close() ends it
        except asyncio.CancelledError:
            cancelled.set()
            raise

    d = Dispatcher(handler=handler, gate=Gate(PolicyConfig.build(dm_policy="open"), RateLimiter(100, 100)))
    d.offer(IncomingMessage(chat=ChatInfo(id=7, type="dm"), sender=ALICE, message_id=1, text="x", date=time.time()))
    await asyncio.wait_for(started.wait(), timeout=60)  # hang guards only
    await asyncio.wait_for(d.close(grace_s=0.2), timeout=60)
    assert cancelled.is_set()  # the grace period ran out and the stuck turn was cancelled
    assert not d.busy()
    assert d.offer(msg(2)).reason == "shutting down"


async def test_stop_is_handled_at_once_not_behind_the_running_turn() -> None:
    release = asyncio.Event()
    seen: list[str] = []

    async def handler(m: IncomingMessage) -> None:
        seen.append(m.text)
        if m.text == "m1":
            await release.wait()  # a long turn holding the chat's lane

    d = Dispatcher(
        handler=handler,
        gate=Gate(PolicyConfig.build(group_policy="open"), RateLimiter(1000, 1000)),
        debounce=DebounceConfig(window_s=0.0),
        immediate=lambda m: m.text == "/stop",
    )
    d.offer(msg(1))
    await until(lambda: seen == ["m1"])
    d.offer(msg(2))
    stop = IncomingMessage(chat=GROUP, sender=ALICE, message_id=3, text="/stop", date=time.time(), mentions_us=True)
    d.offer(stop)
    await until(lambda: "/stop" in seen)
    assert seen == ["m1", "/stop"]  # /stop reached the agent while m1 still ran; m2 waits its turn
    release.set()
    await d.idle()
    assert seen == ["m1", "/stop", "m2"]


async def test_refused_chats_are_logged_once_an_hour_each_and_counted() -> None:
    now = [1000.0]
    turns: list[IncomingMessage] = []
    d = dispatcher(turns, DebounceConfig())
    d.gate.policy = PolicyConfig.build(dm_policy="allowlist", allow_from=[42], group_policy="allowlist")
    d.clock = lambda: now[0]
    bob, eve = UserInfo(id=8, first_name="Bob"), UserInfo(id=9, first_name="Eve")

    def dm(user: UserInfo, i: int) -> IncomingMessage:
        return IncomingMessage(chat=ChatInfo(id=user.id, type="dm"), sender=user, message_id=i, text="hi", date=0)

    with capture_logs() as logs:
        for i in range(3):
            assert not d.offer(dm(bob, i)).accept
        d.offer(dm(eve, 1))
        d.offer(msg(1))  # a group not in group_allow_from
        now[0] += 3601
        d.offer(dm(bob, 9))
    refused = [(e["chat_id"], e["reason"]) for e in logs if e["event"] == "message_refused"]
    assert refused == [
        (8, "sender not in allow_from"),
        (9, "sender not in allow_from"),
        (-5, "group not in group_allow_from"),
        (8, "sender not in allow_from"),  # an hour later
    ]
    assert (d.gate.refused["dm"], d.gate.refused["group"]) == (5, 1) and turns == []
    control = GatePolicy(d.gate)
    assert control.refusals().startswith("Refused by policy since start: 5 DM messages, 1 group message")


async def test_a_deferred_turn_is_not_finished_and_is_taken_up_again_with_a_growing_wait() -> None:
    """A turn that could not record its outcome (a full disk) raises TurnDeferred: its message is neither
    finished nor in flight, a replay of it is accepted again, and the take-up pass runs after a backoff that
    doubles while deferrals go on (waits recorded by an injected sleep, not slept)."""
    turns: list[IncomingMessage] = []
    faults = [True, True, False]  # the disk is full for two turns, then has room

    async def handler(m: IncomingMessage) -> None:
        turns.append(m)
        if faults.pop(0):
            raise TurnDeferred("database or disk is full")

    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    d = Dispatcher(handler=handler, gate=Gate(PolicyConfig.build(dm_policy="open"), RateLimiter(1000, 1000)),
                   sleep=sleep)  # fmt: skip
    dm = replace(msg(1), chat=ChatInfo(id=7, type="dm"))

    async def take_up() -> None:  # what the pipeline's recovery pass does: offer what is open again
        d.offer(dm, accepted=True)

    d.on_deferred = take_up
    assert d.offer(dm).accept
    await until(lambda: len(turns) == 3 and not d.busy())
    await d.idle()
    assert [t.message_id for t in turns] == [1, 1, 1] and d.deferred == 2
    assert waits == [1.0, 2.0]
    assert d.offer(dm).reason == "already in progress"  # answered now: a replay is refused
    await d.close()
