"""Services stopped in the reverse of the order they started, by construction (docs/architecture.md, "Start and stop").

Each service registers its stop the moment it starts (``contextlib.AsyncExitStack``), so a stop order never
has to mirror a start order kept by hand, and a start that fails half-way stops exactly what it started.
One stop that fails or hangs is logged and bounded; the others still run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class Lifecycle:
    def __init__(self, stop_timeout_s: float) -> None:
        self.stop_timeout_s = stop_timeout_s
        self.started: list[str] = []  # in start order
        self.stopped: list[str] = []  # in stop order
        self.failed: list[str] = []  # stops that raised or timed out
        self._exits = contextlib.AsyncExitStack()

    def on_stop(self, name: str, stop: Callable[[], Awaitable[object]]) -> None:
        """``name`` has started (or is about to: a start that raises half-way is stopped too)."""
        self.started.append(name)
        self._exits.push_async_callback(self._stop, name, stop)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """A background task of this run: cancelled in its place when the run stops."""
        task = asyncio.create_task(coro, name=name)

        async def cancel() -> None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # its own failure is not the stop's
                await task

        self.on_stop(name, cancel)
        return task

    async def stop(self) -> None:
        """Stop everything started, the last started first."""
        await self._exits.aclose()

    async def _stop(self, name: str, stop: Callable[[], Awaitable[object]]) -> None:
        try:
            await asyncio.wait_for(stop(), timeout=self.stop_timeout_s)
        except Exception as exc:  # one service that cannot stop must not keep the rest running
            self.failed.append(name)
            log.warning("shutdown_step_failed", step=name, error=repr(exc))
        self.stopped.append(name)
