"""Write-behind batching for the feed archive.

Every update must be committed before the agent sees it, but one transaction per message caps the
archive at the speed of one commit. Callers ``await archiver.run(fn)``: the call returns only after the
transaction containing ``fn`` has committed, while every write submitted in the meantime rides in the
same transaction. Under a burst the batches grow by themselves; a lone message waits for nothing.

A batch whose transaction fails (a full disk, a locked file) is not dropped: it is retried with backoff
until it commits, so nothing is lost, and nothing is acknowledged before it is on disk. The queue is
bounded: while the disk is full, callers wait at ``put`` (back-pressure) instead of piling up in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from tenacity import RetryCallState

from teleton.process.retries import failure, retrying, waits
from teleton.storage import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)
T = TypeVar("T")

MAX_BATCH = 128
MAX_QUEUE = 20_000  # writes waiting for a commit; beyond this, callers wait
RETRY_MAX_S = 10.0


@dataclass
class _Op:
    fn: Callable[[Connection], Any]
    future: asyncio.Future[Any]


@dataclass
class ArchiveBatcher:
    db: Database
    max_batch: int = MAX_BATCH
    max_queue: int = MAX_QUEUE
    retry_max_s: float = RETRY_MAX_S
    _queue: asyncio.Queue[_Op] | None = None
    _task: asyncio.Task[None] | None = None
    batches: int = 0
    writes: int = 0
    failing_since: float | None = None  # while commits fail (status shows it); None when healthy
    last_error: str | None = None

    def start(self) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue(self.max_queue)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush_loop(), name="archive-batcher")

    @property
    def depth(self) -> int:
        return 0 if self._queue is None else self._queue.qsize()

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """Apply ``fn(conn)`` in the next batch transaction; return its result once committed."""
        return await (await self.put(fn))

    async def put(self, fn: Callable[[Connection], T]) -> asyncio.Future[T]:
        """Queue ``fn`` for the next batch (waiting while the queue is full); the returned future resolves,
        in submission order, once its transaction has committed."""
        self.start()
        assert self._queue is not None
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Op(fn, future))
        return future

    async def drain(self) -> None:
        """Wait until everything submitted so far has been committed."""
        if self._task is not None:
            await self.run(lambda conn: None)

    async def close(self, grace_s: float = 10.0) -> None:
        """Commit what is queued (for up to ``grace_s`` if commits keep failing), then stop."""
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.drain(), grace_s)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._queue is not None and not self._queue.empty():  # never committed: say so
            op = self._queue.get_nowait()
            if not op.future.done():
                op.future.set_exception(RuntimeError("the archive closed before this write was committed"))

    async def _flush_loop(self) -> None:
        assert self._queue is not None
        while True:
            ops = [await self._queue.get()]
            while len(ops) < self.max_batch and not self._queue.empty():
                ops.append(self._queue.get_nowait())
            try:
                results = await self._commit(ops)
            except asyncio.CancelledError:
                for op in ops:
                    if not op.future.done():
                        op.future.set_exception(RuntimeError("the archive closed before this write was committed"))
                raise
            self.batches += 1
            self.writes += len(ops)
            for op, (ok, value) in zip(ops, results, strict=True):
                if op.future.done():  # the caller was cancelled; its write still committed
                    continue
                if ok:
                    op.future.set_result(value)
                else:
                    op.future.set_exception(value)

    async def _commit(self, ops: list[_Op]) -> list[tuple[bool, Any]]:
        """Commit one batch, retrying with backoff while the transaction fails (it rolled back each time)."""
        try:
            return await self.db.write(lambda conn: _apply(conn, ops))
        except Exception as exc:
            self.failing_since, self.last_error = time.time(), str(exc)
            log.error("archive_write_failed", error=str(exc), batch=len(ops), effect="retrying; nothing is lost")

        def failed(state: RetryCallState) -> None:
            self.last_error = str(failure(state))

        tries = retrying(
            lambda exc: isinstance(exc, Exception),
            waits(base_s=0.1, max_s=self.retry_max_s, jitter_s=0.2),
            on_retry=failed,
        )
        async for attempt in tries:
            with attempt:
                results = await self.db.write(lambda conn: _apply(conn, ops))
        log.info("archive_write_recovered", after_s=round(time.time() - (self.failing_since or time.time()), 1))
        self.failing_since = None
        return results


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
