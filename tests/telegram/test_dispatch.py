"""The per-chat lanes and group debounce on their own clock: no Telethon needed."""

from __future__ import annotations

import asyncio
import time

from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.telegram.dispatch import DebounceConfig, Dispatcher
from teleton.telegram.policy import PolicyConfig
from teleton.telegram.ratelimit import RateLimiter

GROUP = ChatInfo(id=-5, type="group", title="g")
ALICE = UserInfo(id=7, first_name="Alice")


def msg(i: int, *, mention: bool = True) -> IncomingMessage:
    return IncomingMessage(chat=GROUP, sender=ALICE, message_id=i, text=f"m{i}", date=time.time(), mentions_us=mention)


def dispatcher(turns: list[tuple[float, IncomingMessage]], debounce: DebounceConfig) -> Dispatcher:
    async def handler(m: IncomingMessage) -> None:
        turns.append((time.monotonic(), m))

    return Dispatcher(
        handler=handler,
        policy=PolicyConfig.build(group_policy="open"),
        limiter=RateLimiter(1000, 1000),
        debounce=debounce,
    )


async def test_debounce_waits_for_quiet_but_never_longer_than_the_cap() -> None:
    turns: list[tuple[float, IncomingMessage]] = []
    d = dispatcher(turns, DebounceConfig(window_s=0.1, max_factor=3, max_messages=100))
    start = time.monotonic()
    for i in range(10):  # a message every 60 ms keeps resetting the 100 ms window
        d.offer(msg(i))
        await asyncio.sleep(0.06)
    await d.idle()
    first_turn_at = turns[0][0] - start
    assert 0.28 <= first_turn_at < 0.4  # cut at 3 x 100 ms, not after the whole 600 ms burst
    assert sum(1 + len(m.earlier_context) for _, m in turns) == 10
    await d.close()


async def test_debounce_stops_collecting_at_max_messages() -> None:
    turns: list[tuple[float, IncomingMessage]] = []
    d = dispatcher(turns, DebounceConfig(window_s=1.0, max_factor=3, max_messages=5))
    for i in range(12):
        d.offer(msg(i))
    await d.idle()
    assert [len(m.earlier_context) + 1 for _, m in turns][:2] == [5, 5]
    await d.close()


async def test_a_failing_turn_is_counted_and_the_lane_goes_on() -> None:
    seen: list[int] = []

    async def handler(m: IncomingMessage) -> None:
        seen.append(m.message_id)
        if m.message_id == 1:
            raise RuntimeError("model exploded")

    d = Dispatcher(
        handler=handler,
        policy=PolicyConfig.build(dm_policy="open"),
        limiter=RateLimiter(100, 100),
        debounce=DebounceConfig(window_s=0),
    )
    dm = ChatInfo(id=7, type="dm")
    for i in (1, 2):
        d.offer(IncomingMessage(chat=dm, sender=ALICE, message_id=i, text="x", date=time.time()))
    await d.idle()
    assert seen == [1, 2] and d.failures == 1 and d.turns == 1
    await d.close()


async def test_close_cancels_a_stuck_turn_within_the_grace_period() -> None:
    async def handler(m: IncomingMessage) -> None:
        await asyncio.sleep(3600)

    d = Dispatcher(handler=handler, policy=PolicyConfig.build(dm_policy="open"), limiter=RateLimiter(100, 100))
    d.offer(IncomingMessage(chat=ChatInfo(id=7, type="dm"), sender=ALICE, message_id=1, text="x", date=time.time()))
    await asyncio.sleep(0.01)
    start = time.monotonic()
    await d.close(grace_s=0.2)
    assert time.monotonic() - start < 1
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
        policy=PolicyConfig.build(group_policy="open"),
        limiter=RateLimiter(1000, 1000),
        debounce=DebounceConfig(window_s=0.0),
        immediate=lambda m: m.text == "/stop",
    )
    d.offer(msg(1))
    await asyncio.sleep(0.05)
    d.offer(msg(2))
    stop = IncomingMessage(chat=GROUP, sender=ALICE, message_id=3, text="/stop", date=time.time(), mentions_us=True)
    d.offer(stop)
    await asyncio.sleep(0.05)
    assert seen == ["m1", "/stop"]  # /stop reached the agent while m1 still ran; m2 waits its turn
    release.set()
    await d.idle()
    assert seen == ["m1", "/stop", "m2"]
