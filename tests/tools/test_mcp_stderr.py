"""An MCP server's stderr in the log: a burst of lines per window, each redacted then cut, the rest counted
in one ``mcp_server_stderr_dropped`` line per window; the pipe is read to its end whatever it holds."""

from __future__ import annotations

import asyncio
import io
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from teleton.process import redaction
from teleton.process.logging import configure_logging
from teleton.tools.mcp.stderr import STDERR_BURST, STDERR_LINE_CAP, StderrLimiter, log_lines
from tests.waiting import until


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """As the suite's own (tests/conftest.py), at info: asyncio's debug lines are not the server's."""
    stream = io.StringIO()
    configure_logging(level="info", fmt="json", stream=stream)
    yield stream
    configure_logging(level="warning", fmt="json")
    redaction.forget_remembered()


def events(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_burst_per_window_and_one_count_for_the_rest(log_stream: io.StringIO) -> None:
    clock = Clock()
    limiter = StderrLimiter("noisy", burst=3, window_s=10.0, clock=clock)
    for n in range(20):  # window 1: 3 logged, 17 dropped
        limiter.line(f"first {n}".encode())
    clock.now += 4
    limiter.line(b"still the first window")
    assert limiter.due_in() == 6.0  # when the reader must wake to report it, if nothing else comes
    clock.now += 6
    for n in range(2):  # window 2 opens with this line: the first window's count is logged before it
        limiter.line(f"second {n}".encode())
    clock.now += 30
    limiter.line(b"")  # a blank line logs nothing, but time is up: window 2 closes (nothing dropped)
    for n in range(5):  # window 3: 3 logged, 2 dropped, reported when the stream closes
        limiter.line(f"third {n}".encode())
    limiter.close()

    shown = [(e["event"], e.get("line", e.get("count"))) for e in events(log_stream)]
    assert shown == [
        *(("mcp_server_stderr", f"first {n}") for n in range(3)),
        ("mcp_server_stderr_dropped", 18),
        *(("mcp_server_stderr", f"second {n}") for n in range(2)),
        *(("mcp_server_stderr", f"third {n}") for n in range(3)),
        ("mcp_server_stderr_dropped", 2),
    ]
    assert {e["server"] for e in events(log_stream)} == {"noisy"}


def test_a_line_is_redacted_before_it_is_cut(log_stream: io.StringIO) -> None:
    secret = "across-the-cut-0123456789"
    redaction.remember(secret)
    limiter = StderrLimiter("noisy", clock=Clock())
    limiter.line(("a" * (STDERR_LINE_CAP - 5) + secret + "b" * 1000).encode())
    (event,) = events(log_stream)
    assert event["line"] == "a" * (STDERR_LINE_CAP - 5) + "[reda"  # not "acros": no piece of the secret is left
    assert "acros" not in log_stream.getvalue()


async def test_a_flood_is_read_to_its_end_and_bounded(log_stream: io.StringIO) -> None:
    """Five megabytes, one line of them longer than any buffer: the writer never blocks, and the log gets the
    burst and one count (the clock stands still: one window)."""
    read_fd, write_fd = os.pipe()
    lines = 50_000

    def flood() -> None:
        with os.fdopen(write_fd, "wb") as out:
            out.write(b"z" * 3_000_000 + b"\n")  # longer than the old reader's limit, which ended the reading
            for n in range(lines):
                out.write(f"line {n} ".encode() + b"x" * 30 + b"\n")
            out.write(b"the last one, with no newline")

    writer = threading.Thread(target=flood)
    writer.start()
    await log_lines("noisy", os.fdopen(read_fd, "rb", buffering=0), StderrLimiter("noisy", clock=Clock()))
    writer.join()  # _log_lines returned at EOF: the writer had written everything

    logged = events(log_stream)
    assert [e["event"] for e in logged] == ["mcp_server_stderr"] * STDERR_BURST + ["mcp_server_stderr_dropped"]
    assert logged[0]["line"] == "z" * STDERR_LINE_CAP
    assert logged[1]["line"].startswith("line 0 ")
    assert logged[-1]["count"] == lines + 2 - STDERR_BURST  # every line was read and counted
    assert len(log_stream.getvalue()) < 40_000


async def test_a_window_that_ends_while_the_server_is_quiet_reports_its_count(log_stream: io.StringIO) -> None:
    """The count does not wait for the next line or the end: the reader wakes when the window ends (a short
    window on the real clock; the test waits for the state, with no deadline)."""
    read_fd, write_fd = os.pipe()
    limiter = StderrLimiter("noisy", burst=1, window_s=0.05)
    reader = asyncio.create_task(log_lines("noisy", os.fdopen(read_fd, "rb", buffering=0), limiter))
    with os.fdopen(write_fd, "wb", buffering=0) as out:
        out.write(b"one\ntwo\nthree\n")
        await until(lambda: "mcp_server_stderr_dropped" in log_stream.getvalue())  # the pipe is still open
    await reader
    assert [(e["event"], e.get("line", e.get("count"))) for e in events(log_stream)] == [
        ("mcp_server_stderr", "one"),
        ("mcp_server_stderr_dropped", 2),
    ]
