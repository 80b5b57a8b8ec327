"""A burst of real updates across many chats, fed the way Telethon's update loop feeds them.

Shared by the burst test and ``scripts/bench_ingest.py``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from telethon import TelegramClient, utils
from telethon.tl import types

_bursts = itertools.count(1)
WORDS = ("book", "meeting", "coffee", "deploy", "weather", "music", "train", "lunch", "report", "holiday")


@dataclass(frozen=True)
class Burst:
    """``total`` messages spread round-robin over ``chats`` chats (half DMs, half groups). Updates are built
    on demand, as the network would deliver them, and building message ``i`` twice gives its replay."""

    total: int
    chats: int
    me_username: str = "teleton_bot"
    base: int = field(default_factory=lambda: next(_bursts) * 10_000_000)

    def peers(self, c: int) -> tuple[Any, Any]:
        user = types.User(id=300_000 + c, first_name=f"User{c}", username=f"user{c}", access_hash=c + 1)
        if c % 2 == 0:
            return user, user
        group = types.Chat(
            id=600_000 + c,
            title=f"Group {c}",
            photo=types.ChatPhotoEmpty(),
            participants_count=10,
            date=None,
            version=1,
        )
        return group, user

    def update(self, i: int) -> Any:
        chat, sender = self.peers(i % self.chats)
        w = WORDS[i % len(WORDS)]
        text = f"message {i} about the {w}" + (f" @{self.me_username}" if i % 7 == 0 else "")
        peer = types.PeerUser(chat.id) if isinstance(chat, types.User) else types.PeerChat(chat.id)
        msg = types.Message(
            id=self.base + i, peer_id=peer, date=datetime.now(UTC), message=text, from_id=types.PeerUser(sender.id)
        )
        update = types.UpdateNewMessage(message=msg, pts=1, pts_count=1)
        update._entities = {utils.get_peer_id(e): e for e in (chat, sender)}
        return update

    def updates(self, indices: Iterable[int] | None = None) -> Iterator[Any]:
        for i in range(self.total) if indices is None else indices:
            yield self.update(i)


async def feed(client: TelegramClient, updates: Iterable[Any], *, per_read: int = 25) -> None:
    """Dispatch like Telethon's update loop: one task per update, a few updates per network read.

    Finished tasks are not kept (Telethon's loop drops them too), so the collector does not have to walk
    thousands of them: the measured pauses are the daemon's, not this driver's.
    """
    loop = asyncio.get_running_loop()
    pending = 0
    done = asyncio.Event()
    errors: list[BaseException] = []

    def finished(task: asyncio.Task[Any]) -> None:
        nonlocal pending
        pending -= 1
        if not task.cancelled() and task.exception() is not None:
            errors.append(task.exception())  # type: ignore[arg-type]
        if pending == 0:
            done.set()

    for n, update in enumerate(updates, 1):
        pending += 1
        loop.create_task(client._dispatch_update(update)).add_done_callback(finished)
        del update  # once dispatched, only the handler holds it, as in Telethon's loop
        if n % per_read == 0:
            await asyncio.sleep(0)
    if pending:
        await done.wait()
    if errors:
        raise errors[0]


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
