"""Services stop in the reverse of their start order, by construction (teleton.process.lifecycle)."""

from __future__ import annotations

import asyncio

from teleton.process.lifecycle import Lifecycle


class Service:
    def __init__(self, name: str, log: list[str], fail: bool = False, hang: bool = False) -> None:
        self.name, self.log, self.fail, self.hang = name, log, fail, hang

    async def stop(self) -> None:
        self.log.append(self.name)
        if self.hang:
            await asyncio.Event().wait()
        if self.fail:
            raise OSError("disk gone")


async def test_the_stop_order_is_the_start_order_reversed_and_a_service_added_in_the_middle_stops_in_its_place():
    stopped: list[str] = []
    life = Lifecycle(stop_timeout_s=5)
    for name in ("database", "agent", "gateway"):
        life.on_stop(name, Service(name, stopped).stop)
    assert stopped == []  # registering starts nothing and stops nothing
    await life.stop()
    assert stopped == ["gateway", "agent", "database"] == life.stopped

    stopped.clear()
    life = Lifecycle(stop_timeout_s=5)
    for name in ("database", "agent", "feed embedder", "gateway"):  # one more, between agent and gateway
        life.on_stop(name, Service(name, stopped).stop)
    await life.stop()
    assert stopped == ["gateway", "feed embedder", "agent", "database"]
    assert life.started == ["database", "agent", "feed embedder", "gateway"]


async def test_a_stop_that_fails_or_hangs_is_bounded_and_the_rest_still_stop():
    stopped: list[str] = []
    life = Lifecycle(stop_timeout_s=0.05)
    life.on_stop("database", Service("database", stopped).stop)
    life.on_stop("mcp servers", Service("mcp servers", stopped, hang=True).stop)
    life.on_stop("dashboard", Service("dashboard", stopped, fail=True).stop)
    await life.stop()
    assert stopped == ["dashboard", "mcp servers", "database"]
    assert life.failed == ["dashboard", "mcp servers"]


async def test_a_task_is_cancelled_in_its_place_and_a_start_that_failed_half_way_stops_what_it_started():
    order: list[str] = []
    life = Lifecycle(stop_timeout_s=5)
    life.on_stop("database", Service("database", order).stop)
    ran = asyncio.Event()

    async def status_loop() -> None:
        try:
            ran.set()
            await asyncio.Event().wait()
        finally:
            order.append("status-file")

    task = life.spawn(status_loop(), "status-file")
    await ran.wait()

    async def start() -> None:
        life.on_stop("gateway", Service("gateway", order).stop)
        raise ConnectionError("Telegram unreachable")  # half-way: nothing after the gateway started

    try:
        await start()
    except ConnectionError:
        await life.stop()
    assert order == ["gateway", "status-file", "database"]
    assert task.cancelled()
