"""Per-key locks that are forgotten when nobody holds or waits for them.

A ``defaultdict(asyncio.Lock)`` keyed by chat keeps one lock per chat ever seen: after a month and 20,000
chats, 20,000 locks. These are dropped as soon as the last holder or waiter leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Hashable


class KeyedLocks:
    def __init__(self) -> None:
        self._locks: dict[Hashable, asyncio.Lock] = {}
        self._users: Counter[Hashable] = Counter()

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] += 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if self._users[key] <= 0:
                del self._users[key]
                self._locks.pop(key, None)

    def __len__(self) -> int:
        return len(self._locks)
