"""Sliding-window rate limits on agent turns: per chat and across all chats (messages per minute).

Chats idle for a whole window hold nothing: every ``PRUNE_EVERY`` calls, windows are expired and the empty
ones dropped, so 20,000 chats over a month cost what the last minute's chats cost.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW_S = 60.0
PRUNE_EVERY = 1024


@dataclass
class RateLimiter:
    per_chat: int
    global_: int
    clock: Callable[[], float] = time.monotonic
    _chats: dict[int, deque[float]] = field(default_factory=dict)
    _all: deque[float] = field(default_factory=deque)
    _calls: int = 0

    def allow(self, chat_id: int) -> str | None:
        """Take one slot; return None when allowed, else which limit was hit."""
        now = self.clock()
        self._calls += 1
        if self._calls % PRUNE_EVERY == 0:
            self.prune(now)
        chat = self._chats.setdefault(chat_id, deque())
        _expire(chat, now)
        _expire(self._all, now)
        if len(chat) >= self.per_chat:
            return "per-chat rate limit"
        if len(self._all) >= self.global_:
            return "global rate limit"
        chat.append(now)
        self._all.append(now)
        return None

    def prune(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        for chat_id in list(self._chats):
            window = self._chats[chat_id]
            _expire(window, now)
            if not window:
                del self._chats[chat_id]

    @property
    def tracked_chats(self) -> int:
        return len(self._chats)


def _expire(window: deque[float], now: float) -> None:
    while window and now - window[0] >= WINDOW_S:
        window.popleft()
