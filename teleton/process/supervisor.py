"""Every background loop of the daemon under one supervisor (docs/operations.md): retried, classified, visible.

A loop is a coroutine function ``body(up)``: it calls ``up()`` once it is working (connected, started)
and returns when its work ends normally (a connection dropped: it is started again at once after a short
pause, with a fresh backoff). An exception is either fatal — ``classify(exc)`` names why (a revoked
session, a banned account, a deleted bot token) — and the daemon stops with that one line and a non-zero
exit; or it is retried with exponential backoff and jitter (tenacity), honouring a FloodWait's own delay.
While a loop is down its health says since when and why; ``down_longer_than`` tells the watchdog to stop
pinging, so systemd restarts a daemon whose loop stays wedged.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import structlog
from tenacity import RetryCallState

from teleton.process.retries import failure, retrying, waits

log = structlog.get_logger(__name__)

Body = Callable[[Callable[[], None]], Awaitable[None]]
Classify = Callable[[BaseException], str | None]
Describe = Callable[[BaseException], str]


def never_fatal(exc: BaseException) -> str | None:
    return None


@dataclass
class LoopHealth:
    name: str
    state: str = "starting"  # starting | up | down | stopped | fatal
    since: float = 0.0
    restarts: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    retry_in_s: float | None = None  # the wait before the next attempt, while down

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Supervisor:
    def __init__(
        self,
        on_fatal: Callable[[str, str], None],
        *,
        max_backoff_s: float = 300.0,
        first_backoff_s: float = 1.0,
        jitter_s: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.on_fatal = on_fatal
        self.clock = clock
        self.loops: dict[str, LoopHealth] = {}
        self.errors: dict[str, tuple[str, float]] = {}  # kind (model, telegram, storage, a loop) -> last error
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wait = waits(base_s=first_backoff_s, max_s=max_backoff_s, jitter_s=jitter_s, told=_flood_seconds)
        self._pause_s = first_backoff_s

    def run(
        self, name: str, body: Body, *, classify: Classify = never_fatal, describe: Describe | None = None
    ) -> asyncio.Task[None]:
        """``describe``: the words ``teleton status`` shows for an error of this loop (default: its type and
        text)."""
        health = self.loops[name] = LoopHealth(name, since=self.clock())
        work = self._supervise(health, body, classify, describe or _describe)
        task = asyncio.get_running_loop().create_task(work, name=f"loop-{name}")
        self._tasks[name] = task
        return task

    def report(self, kind: str, error: BaseException | str) -> None:
        """The last error of a kind that is not a loop's own (the model, a send, a distiller commit)."""
        self.errors[kind] = (_describe(error), self.clock())

    def down_longer_than(self, grace_s: float) -> list[str]:
        now = self.clock()
        return [h.name for h in self.loops.values() if h.state == "down" and now - h.since > grace_s]

    async def stop(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for health in self.loops.values():
            if health.state != "fatal":
                health.state = "stopped"

    async def _supervise(self, health: LoopHealth, body: Body, classify: Classify, describe: Describe) -> None:
        def up() -> None:
            if health.state != "up":
                health.state, health.since, health.retry_in_s = "up", self.clock(), None

        def down(state: RetryCallState) -> None:
            error = failure(state)
            if health.state != "down":
                health.state, health.since = "down", self.clock()
            health.restarts += 1
            health.last_error, health.last_error_at = describe(error) if error else _describe(error), self.clock()
            health.retry_in_s = state.next_action.sleep if state.next_action else None
            self.errors[health.name] = (health.last_error, self.clock())
            log.warning("loop_down", loop=health.name, error=health.last_error, attempt=state.attempt_number)

        try:
            while True:
                tries = retrying(
                    lambda exc: isinstance(exc, Exception) and classify(exc) is None, self._wait, on_retry=down
                )
                async for attempt in tries:
                    with attempt:
                        await body(up)
                # The work ended normally (a connection closed): start over, with a fresh backoff.
                health.restarts += 1
                await asyncio.sleep(self._pause_s)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # classified fatal
            reason = classify(exc) or _describe(exc)
            health.state, health.since = "fatal", self.clock()
            health.last_error, health.last_error_at = reason, self.clock()
            log.error("loop_fatal", loop=health.name, reason=reason)
            self.on_fatal(health.name, reason)


def _describe(error: BaseException | str | None) -> str:
    if error is None or isinstance(error, str):
        return error or "unknown error"
    return f"{type(error).__name__}: {error}"[:300]


def _flood_seconds(error: BaseException) -> float | None:
    """Telegram's FloodWait says how long: exactly that (process imports no Telethon, hence by attribute)."""
    flood = getattr(error, "seconds", None)
    return float(flood) if isinstance(flood, int | float) and flood > 0 else None
