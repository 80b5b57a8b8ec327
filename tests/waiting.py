"""Waiting for a state, with no clock: a test polls until the state holds. A hang is turned into a failure by
pytest-timeout (``timeout`` in pyproject.toml, or a test's own ``pytest.mark.timeout``), whose report shows
the waiting line, never by a bound here, so a busy machine only makes a test slower, never red."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any


async def until(predicate: Callable[[], Any], interval_s: float = 0.01) -> None:
    """Wait on the event loop until ``predicate()`` (sync or async) holds."""
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        await asyncio.sleep(interval_s)


def until_sync(predicate: Callable[[], Any], interval_s: float = 0.02) -> None:
    """Wait in this thread until ``predicate()`` holds (a daemon subprocess, a file another thread writes)."""
    while not predicate():
        time.sleep(interval_s)
