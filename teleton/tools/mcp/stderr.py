"""An MCP server's stderr, into the log: line by line with its name, each line redacted and cut, at most a
burst of lines per window (the rest counted, and the count logged), and the pipe always read to its end.

A server printing megabytes must not fill the log (nor the journal, nor the dashboard's Logs page), nor block
on a full pipe because nobody reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import structlog

from teleton.process import redaction

log = structlog.get_logger(__name__)

STDERR_LINE_CAP = 500  # characters of one stderr line that are logged
STDERR_BURST = 50  # lines logged per window and server; the rest are counted and dropped
STDERR_WINDOW_S = 60.0
# Bytes of one line kept for redaction before the cut: a secret across the cut goes whole, not half.
_STDERR_KEEP_BYTES = STDERR_LINE_CAP * 4 + 1024
_STDERR_CHUNK = 1 << 16
_READERS: set[asyncio.Task[None]] = set()  # stderr loggers, kept referenced while they run


@contextlib.contextmanager
def stderr_to_log(name: str, limiter: StderrLimiter | None = None) -> Any:
    """A file the server writes its stderr to; its lines are logged as ``mcp_server_stderr`` with its name
    (cut and rate-limited: ``limiter``, which also keeps the last line)."""
    read_fd, write_fd = os.pipe()
    writer = os.fdopen(write_fd, "w")
    loop = asyncio.get_running_loop()
    reader_file = os.fdopen(read_fd, "rb", buffering=0)
    task = loop.create_task(log_lines(name, reader_file, limiter), name=f"mcp-{name}-stderr")
    _READERS.add(task)
    task.add_done_callback(_READERS.discard)
    try:
        yield writer
    finally:
        writer.close()  # the server holds its own copy; EOF comes when it exits


class StderrLimiter:
    """One server's stderr lines into the log: at most ``burst`` per window of ``window_s``, each redacted
    then cut at ``STDERR_LINE_CAP``; lines past the burst are counted, and one ``mcp_server_stderr_dropped``
    line (server, count) is logged for each window that dropped any, when it ends or the stream closes.

    A window opens with the first line after the last one ended. ``clock`` is monotonic seconds. ``last`` is
    the last line read (redacted and cut, dropped or not) and ``ended`` is set once the pipe has closed: a
    server that dies before it answers is explained by it where no log is read (``teleton mcp add``)."""

    def __init__(
        self,
        name: str,
        *,
        burst: int = STDERR_BURST,
        window_s: float = STDERR_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self._opened: float | None = None
        self._logged = 0
        self._dropped = 0
        self._last = b""
        self.ended = asyncio.Event()

    @property
    def last(self) -> str:
        # Redacted before the cut: what the log processors redact after it could be half a secret.
        return redaction.redact_text(self._last.decode("utf-8", errors="replace").strip())[:STDERR_LINE_CAP]

    def line(self, raw: bytes) -> None:
        self.tick()
        if not raw.strip():
            return
        self._last = raw
        if self._opened is None:
            self._opened, self._logged = self.clock(), 0
        if self._logged >= self.burst:  # counted before any decoding: a flood costs little here
            self._dropped += 1
            return
        self._logged += 1
        log.info("mcp_server_stderr", server=self.name, line=self.last)

    def due_in(self) -> float | None:
        """Seconds until the open window ends, when it has dropped lines to report (None: nothing to wait for)."""
        if self._opened is None or not self._dropped:
            return None
        return max(0.0, self._opened + self.window_s - self.clock())

    def tick(self) -> None:
        """Close the window if its time is up: its dropped count is logged."""
        if self._opened is not None and self.clock() >= self._opened + self.window_s:
            self._report()
            self._opened = None

    def close(self) -> None:
        self._report()
        self._opened = None
        self.ended.set()

    def _report(self) -> None:
        if self._dropped:
            log.warning("mcp_server_stderr_dropped", server=self.name, count=self._dropped, window_s=self.window_s)
        self._dropped = 0


async def log_lines(name: str, pipe: Any, limiter: StderrLimiter | None = None) -> None:
    """Read ``pipe`` to its end, whatever it holds: the server never blocks on a full pipe, and a line of any
    length costs at most ``_STDERR_KEEP_BYTES`` here (the rest of it is read and discarded)."""
    limiter = limiter or StderrLimiter(name)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_STDERR_CHUNK)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    partial = bytearray()
    try:
        while True:
            wait = limiter.due_in()
            try:
                # A read cancelled by the timeout takes nothing from the buffer.
                chunk = await (
                    reader.read(_STDERR_CHUNK) if wait is None else asyncio.wait_for(reader.read(_STDERR_CHUNK), wait)
                )
            except TimeoutError:  # a window with dropped lines ended while the server was quiet
                limiter.tick()
                continue
            if not chunk:
                break
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                partial += chunk[start:end][: max(0, _STDERR_KEEP_BYTES - len(partial))]
                limiter.line(bytes(partial))
                partial.clear()
                start = end + 1
            partial += chunk[start:][: max(0, _STDERR_KEEP_BYTES - len(partial))]
        if partial:  # the last line, without its newline
            limiter.line(bytes(partial))
    finally:
        limiter.close()
        transport.close()
