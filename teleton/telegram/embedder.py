"""The background loop that embeds archived messages, off the receive path.

The receive path only commits rows (``embedded = 0``) and pokes this loop; the loop calls the memory
engine's batch worker (``teleton.memory.feed_embedding.embed_pending``) until nothing is pending, then
sleeps until the next poke (or a periodic check, which also picks up rows left over from a restart or a
model change). A failing batch (model error, disk) is logged and retried later, never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from teleton.storage import Database

log = structlog.get_logger(__name__)

IDLE_CHECK_S = 30.0
ERROR_BACKOFF_S = 10.0
BATCH = 64

EmbedPending = Callable[..., Awaitable[int]]


def default_worker() -> EmbedPending:
    from teleton.memory.feed_embedding import embed_pending  # type: ignore[import-not-found]

    return embed_pending  # type: ignore[no-any-return]


@dataclass
class FeedEmbedder:
    db: Database
    provider: Any
    embed_pending: EmbedPending = field(default_factory=default_worker)
    batch: int = BATCH
    embedded: int = 0
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    def poke(self) -> None:
        """New rows were archived (cheap; safe to call for every message)."""
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="feed-embedder")
            self._wake.set()  # rows may be pending from before this start

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def drain(self) -> int:
        """Embed everything pending now (tests, CLI); return how many rows were embedded."""
        total = 0
        while n := await self.embed_pending(self.db, self.provider, batch=self.batch):
            total += n
        self.embedded += total
        return total

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_CHECK_S)
            self._wake.clear()
            try:
                await self.drain()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("feed_embedding_failed", error=str(exc), retry_in_s=ERROR_BACKOFF_S)
                await asyncio.sleep(ERROR_BACKOFF_S)
                self._wake.set()
