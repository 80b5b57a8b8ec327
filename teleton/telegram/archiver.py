"""Write-behind batching for the feed archive.

Every update must be committed before the agent sees it, but one transaction per message caps the
archive at the speed of one commit. Callers ``await archiver.run(fn)``: the call returns only after the
transaction containing ``fn`` has committed, while every write submitted in the meantime rides in the
same transaction. Under a burst the batches grow by themselves; a lone message waits for nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from teleton.storage import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)
T = TypeVar("T")

MAX_BATCH = 128


@dataclass
class _Op:
    fn: Callable[[Connection], Any]
    future: asyncio.Future[Any]


@dataclass
class ArchiveBatcher:
    db: Database
    max_batch: int = MAX_BATCH
    _queue: asyncio.Queue[_Op] = field(default_factory=asyncio.Queue)
    _task: asyncio.Task[None] | None = None
    batches: int = 0
    writes: int = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush_loop(), name="archive-batcher")

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """Apply ``fn(conn)`` in the next batch transaction; return its result once committed."""
        return await self.submit(fn)

    def submit(self, fn: Callable[[Connection], T]) -> asyncio.Future[T]:
        """Queue ``fn`` for the next batch; the future resolves (in submission order) once committed."""
        self.start()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Op(fn, future))
        return future

    async def drain(self) -> None:
        """Wait until everything submitted so far has been committed."""
        if self._task is not None:
            await self.run(lambda conn: None)

    async def close(self) -> None:
        await self.drain()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _flush_loop(self) -> None:
        while True:
            ops = [await self._queue.get()]
            while len(ops) < self.max_batch and not self._queue.empty():
                ops.append(self._queue.get_nowait())
            try:
                results = await self.db.write(lambda conn, ops=ops: _apply(conn, ops))
            except Exception as exc:  # the whole transaction failed (disk full, locked): tell every caller
                log.error("archive_write_failed", error=str(exc), batch=len(ops))
                for op in ops:
                    if not op.future.done():
                        op.future.set_exception(exc)
                continue
            self.batches += 1
            self.writes += len(ops)
            for op, (ok, value) in zip(ops, results, strict=True):
                if op.future.done():  # the caller was cancelled; its write still committed
                    continue
                if ok:
                    op.future.set_result(value)
                else:
                    op.future.set_exception(value)


def _apply(conn: Connection, ops: list[_Op]) -> list[tuple[bool, Any]]:
    # A savepoint per write: one bad record fails alone instead of taking its whole batch down.
    results: list[tuple[bool, Any]] = []
    for op in ops:
        conn.execute("savepoint op")
        try:
            value = op.fn(conn)
        except Exception as exc:
            conn.execute("rollback to op")
            conn.execute("release op")
            results.append((False, exc))
            continue
        conn.execute("release op")
        results.append((True, value))
    return results
