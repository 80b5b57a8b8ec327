"""Whether model calls are retrying right now, since when and why: the line ``teleton status`` shows during an
outage, instead of only the messages waiting for it.

A retry sequence opens at a call's first retry and closes when that call returns or gives up for good. Calls
run in parallel (chats, the distiller), so each sequence is tracked on its own: one answered call must not hide
another that still retries. The line gives the oldest open sequence's start and the latest reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class RetryWatch:
    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self.wall = wall  # for the "since HH:MM" people read
        self._open: dict[object, float] = {}  # sequence -> when its first retry began
        self.last = ""  # the reason of the latest retry of any open sequence

    def retrying(self, sequence: object, reason: str) -> None:
        self._open.setdefault(sequence, self.wall())
        self.last = reason

    def ended(self, sequence: object) -> None:
        """The call answered or gave up: its sequence is over."""
        self._open.pop(sequence, None)
        if not self._open:
            self.last = ""

    def line(self) -> str | None:
        """``model retrying since 14:02 (last: 529 Overloaded)``, or None while no call retries."""
        if not self._open:
            return None
        since = time.strftime("%H:%M", time.localtime(min(self._open.values())))
        return f"model retrying since {since} (last: {self.last[:120]})"
