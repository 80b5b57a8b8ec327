"""Sliding-window rate limits on agent turns: per chat and across all chats (messages per minute)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW_S = 60.0


@dataclass
class RateLimiter:
    per_chat: int
    global_: int
    clock: Callable[[], float] = time.monotonic
    _chats: dict[int, deque[float]] = field(default_factory=dict)
    _all: deque[float] = field(default_factory=deque)

    def allow(self, chat_id: int) -> str | None:
        """Take one slot; return None when allowed, else which limit was hit."""
        now = self.clock()
        chat = self._chats.setdefault(chat_id, deque())
        _expire(chat, now)
        _expire(self._all, now)
        if len(chat) >= self.per_chat:
            return "per-chat rate limit"
        if len(self._all) >= self.global_:
            return "global rate limit"
        chat.append(now)
        self._all.append(now)
        if len(self._chats) > 10_000:  # idle chats would otherwise accumulate forever
            self._chats = {cid: q for cid, q in self._chats.items() if q}
        return None


def _expire(window: deque[float], now: float) -> None:
    while window and now - window[0] >= WINDOW_S:
        window.popleft()
