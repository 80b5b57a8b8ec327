"""The loopback transport's stand-in for Telegram's servers: what the chats have received, kept on disk.

As Telegram does, it holds a message once its line is written (before the daemon archives it), refuses a
``random_id`` it has seen (a bounded number: ``REMEMBERED``), and numbers messages across restarts; fault
tests count what the chats received from this file (``<socket>.received.jsonl``), never the database. A line
is appended and flushed on the event loop, so a kill -9 cannot take it back and the order is exact.
``TELETON_LOOPBACK_DIE_AFTER=N`` (fault tests only) kills the process right after the N-th message received.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REMEMBERED = 50_000


@dataclass
class Received:
    message_id: int
    duplicate: bool


@dataclass
class LoopbackChats:
    path: Path
    _ids: OrderedDict[int, int] = field(default_factory=OrderedDict)  # random_id -> message id, the newest
    _next: int = 0
    _file: IO[str] | None = None
    _die_after: int = 0
    _received: int = 0

    def open(self) -> LoopbackChats:
        self._next = int(time.time() * 1000) % 1_000_000_000 + 1_000_000_000
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:  # a line cut by a power loss: that message never arrived
                    continue
                self._remember(int(entry["random_id"]), int(entry["message_id"]))
                self._next = max(self._next, int(entry["message_id"]) + 1)
        self._file = self.path.open("a", encoding="utf-8")
        self._die_after = int(os.environ.get("TELETON_LOOPBACK_DIE_AFTER") or 0)
        return self

    def receive(
        self, random_id: int, chat_id: int, text: str, reply_to: int | None, topic_id: int | None = None
    ) -> Received:
        """The chat receives this message (in forum topic ``topic_id``), unless one with ``random_id`` arrived
        before."""
        known = self._ids.get(random_id)
        if known is not None:
            return Received(known, duplicate=True)
        assert self._file is not None, "LoopbackChats.open() first"
        message_id, self._next = self._next, self._next + 1
        entry: dict[str, Any] = {"random_id": random_id, "chat_id": chat_id, "message_id": message_id,
                                 "text": text, "reply_to": reply_to, "topic_id": topic_id}  # fmt: skip
        self._file.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._file.flush()
        self._remember(random_id, message_id)
        self._received += 1
        if self._received == self._die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return Received(message_id, duplicate=False)

    def _remember(self, random_id: int, message_id: int) -> None:
        self._ids[random_id] = message_id
        if len(self._ids) > REMEMBERED:
            self._ids.popitem(last=False)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
