"""The one retry rule (teleton.process.retries): the failure's own delay wins, else exponential back-off up to a
cap; the last failure is raised as itself. The waits are recorded by a fake sleep, not timed."""

from __future__ import annotations

import pytest

from teleton.process.retries import retrying, waits


class Busy(Exception):
    def __init__(self, after: float | None = None) -> None:
        super().__init__(f"busy (after {after})")
        self.after = after


async def run(failures: list[Exception], **policy: object) -> tuple[list[float], int]:
    slept: list[float] = []
    calls = 0

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async for attempt in retrying(sleep=sleep, **policy):  # type: ignore[arg-type]
        with attempt:
            calls += 1
            if failures:
                raise failures.pop(0)
    return slept, calls


async def test_back_off_doubles_up_to_its_cap() -> None:
    slept, calls = await run(
        [Busy() for _ in range(5)], retry=lambda e: isinstance(e, Busy), wait=waits(base_s=1, max_s=5)
    )
    assert (slept, calls) == ([1, 2, 4, 5, 5], 6)


async def test_the_delay_a_failure_names_wins() -> None:
    told = waits(base_s=1, max_s=5, told=lambda e: e.after if isinstance(e, Busy) else None)
    slept, _ = await run([Busy(after=30), Busy(), Busy(after=0)], retry=lambda e: True, wait=told)
    assert slept == [30, 2, 0]


async def test_the_last_failure_is_raised_as_itself_and_others_at_once() -> None:
    with pytest.raises(Busy, match="busy"):
        await run([Busy() for _ in range(9)], retry=lambda e: True, wait=waits(base_s=0, max_s=0), attempts=3)
    with pytest.raises(ValueError):
        await run([ValueError("a mistake")], retry=lambda e: isinstance(e, Busy), wait=waits(base_s=1, max_s=1))


async def test_jitter_stays_within_its_bound() -> None:
    slept, _ = await run(
        [Busy() for _ in range(3)], retry=lambda e: True, wait=waits(base_s=1, max_s=100, jitter_s=0.5)
    )
    assert [int(s) for s in slept] == [1, 2, 4] and all(s - int(s) <= 0.5 for s in slept)
