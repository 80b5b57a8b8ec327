"""A burst of real updates across many chats, fed the way Telethon's update loop feeds them.

Shared by the burst test and ``scripts/bench_ingest.py``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from telethon import TelegramClient, utils
from telethon.tl import types

_ids = itertools.count(1)
WORDS = ("book", "meeting", "coffee", "deploy", "weather", "music", "train", "lunch", "report", "holiday")


def burst_updates(total: int, chats: int, *, me_username: str = "teleton_bot") -> list[Any]:
    """``total`` new-message updates spread round-robin over ``chats`` chats (half DMs, half groups)."""
    peers: list[tuple[Any, Any]] = []
    for c in range(chats):
        user = types.User(id=300_000 + c, first_name=f"User{c}", username=f"user{c}", access_hash=c + 1)
        if c % 2 == 0:
            peers.append((user, user))
        else:
            group = types.Chat(id=600_000 + c, title=f"Group {c}", photo=types.ChatPhotoEmpty(),
                               participants_count=10, date=None, version=1)
            peers.append((group, user))
    updates = []
    now = datetime.now(UTC)
    for i in range(total):
        chat, sender = peers[i % chats]
        w = WORDS[i % len(WORDS)]
        text = f"message {i} about the {w}" + (f" @{me_username}" if i % 7 == 0 else "")
        peer = types.PeerUser(chat.id) if isinstance(chat, types.User) else types.PeerChat(chat.id)
        msg = types.Message(id=next(_ids), peer_id=peer, date=now, message=text,
                            from_id=types.PeerUser(sender.id))
        update = types.UpdateNewMessage(message=msg, pts=1, pts_count=1)
        update._entities = {utils.get_peer_id(e): e for e in {id(chat): chat, id(sender): sender}.values()}
        updates.append(update)
    return updates


async def feed(client: TelegramClient, updates: Sequence[Any], *, per_read: int = 25) -> None:
    """Dispatch like Telethon's update loop: one task per update, a few updates per network read."""
    tasks = []
    for start in range(0, len(updates), per_read):
        for update in updates[start : start + per_read]:
            tasks.append(asyncio.get_running_loop().create_task(client._dispatch_update(update)))
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)


@dataclass
class LagMeter:
    """A ticker: how late does a 5 ms timer fire? The worst delay is the longest the loop was stalled."""

    interval: float = 0.005
    worst: float = 0.0
    samples: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    def start(self) -> LagMeter:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    async def stop(self) -> float:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        return self.worst

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self.interval)
            lag = loop.time() - before - self.interval
            self.samples.append(lag)
            self.worst = max(self.worst, lag)
