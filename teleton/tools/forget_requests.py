"""Forget requests waiting for ``/forget confirm`` (``tools/families/forget.py`` says why a confirmation):
the one store of the process, shared by the tool that makes them and the command that carries them out."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from teleton.memory.forget.everywhere import Findings

CONFIRM_S = 300.0
_KEPT = 1_000  # requests held at once (one per chat and person); the oldest beyond it are dropped


@dataclass(frozen=True)
class PendingForget:
    chat_id: int
    sender_id: int
    findings: Findings
    at: float


@dataclass
class PendingForgets:
    """Requests waiting for ``/forget confirm``, one per (chat, person); they expire after ``CONFIRM_S``."""

    clock: Callable[[], float] = time.monotonic
    _waiting: dict[tuple[int, int], PendingForget] = field(default_factory=dict)

    def put(self, chat_id: int, sender_id: int, findings: Findings) -> None:
        now = self.clock()
        # Expired requests go (they hold excerpts of what is to be forgotten), and the oldest beyond the cap.
        for key in [k for k, p in self._waiting.items() if now - p.at > CONFIRM_S or k == (chat_id, sender_id)]:
            del self._waiting[key]
        self._waiting[(chat_id, sender_id)] = PendingForget(chat_id, sender_id, findings, now)
        while len(self._waiting) > _KEPT:
            self._waiting.pop(next(iter(self._waiting)))

    def take(self, chat_id: int, sender_id: int) -> PendingForget | None:
        """The person's request in this chat, if still fresh; taken either way (one confirmation each)."""
        pending = self._waiting.pop((chat_id, sender_id), None)
        if pending is None or self.clock() - pending.at > CONFIRM_S:
            return None
        return pending

    def drop(self, chat_id: int, sender_id: int) -> bool:
        return self._waiting.pop((chat_id, sender_id), None) is not None
