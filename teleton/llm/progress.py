"""What a turn is doing, for whoever shows it as it happens: ``teleton chat``'s screen, or a private Telegram
chat whose answer is edited in as it is written (``teleton/agent/delivery/streaming.py``).

The watcher sets ``WATCHING`` around a turn; the tool loop reads it and streams the answer, names each tool
call and reports retries to it. Only the answering tool loop reads it, so a summary or a distillation
started during the turn never streams. Unset (groups, scheduled tasks), requests are plain and nothing is
reported.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Progress:
    text: Callable[[str], None]  # a piece of the answer as it arrives
    tool: Callable[[str, dict[str, Any]], None]  # a tool call about to run: name and input
    retry: Callable[[int, float, str], None]  # a retry: attempt number, wait in seconds, reason


WATCHING: ContextVar[Progress | None] = ContextVar("teleton_progress", default=None)
