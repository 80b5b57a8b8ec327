"""Stay connected: reconnect with exponential backoff (and jitter) until asked to stop."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Backoff:
    base_s: float = 1.0
    max_s: float = 300.0
    jitter: float = 0.2

    def delay(self, failures: int) -> float:
        raw = min(self.max_s, self.base_s * (2 ** max(failures - 1, 0)))
        return raw * (1 + random.uniform(-self.jitter, self.jitter)) if self.jitter else raw


async def keep_connected(
    connect: Callable[[], Awaitable[None]],
    wait_disconnected: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    *,
    backoff: Backoff,
    fatal: tuple[type[BaseException], ...] = (),
    on_retry: Callable[[int, float, BaseException | None], None] | None = None,
) -> None:
    """Loop: connect, wait for the connection to drop, back off, again. ``fatal`` errors propagate.

    A connection that stayed up resets the backoff, so a flaky network retries quickly and a dead one
    settles at ``backoff.max_s`` between attempts.
    """
    failures = 0
    while not stop.is_set():
        error: BaseException | None = None
        try:
            await connect()
            failures = 0
            await _until_either(wait_disconnected(), stop)
        except fatal:
            raise
        except (OSError, ConnectionError, TimeoutError, RuntimeError) as exc:
            error = exc
        if stop.is_set():
            return
        failures += 1
        delay = backoff.delay(failures)
        log.warning("telegram_disconnected", error=str(error) if error else None, retry_in_s=round(delay, 2))
        if on_retry is not None:
            on_retry(failures, delay, error)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)


async def _until_either(waiting: Awaitable[None], stop: asyncio.Event) -> None:
    first = asyncio.ensure_future(waiting)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({first, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (first, stopper):
            if not task.done():
                task.cancel()
    if first.done() and not first.cancelled() and first.exception() is not None:
        raise first.exception()  # type: ignore[misc]
