"""Real Telethon, no network: a TelegramClient whose only override is ``_call`` (``tests/fakes/telegram_client.py``).

Updates are real TL objects handed to the client's own dispatcher (``client._dispatch_update``), so the
handlers run exactly as they do live. Outgoing requests are recorded and answered with real TL results.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from telethon import utils
from telethon.tl import types

from teleton.gateway.contract import IncomingMessage
from teleton.storage import Database
from teleton.telegram.gateway import GatewaySettings, TelegramGateway
from teleton.telegram.receive.dispatch import DebounceConfig
from teleton.telegram.receive.policy import PolicyConfig
from tests.fakes.telegram_client import (  # the gateway tests' world, imported from here by other suites
    ADMIN,
    ALICE,
    BOB,
    CHANNEL,
    GIF_BOT,  # noqa: F401
    GROUP,
    JOINABLE,  # noqa: F401
    ME,
    OTHER_BOT,
    SUPERGROUP,
    RecordingClient,
    sticker,  # noqa: F401
)

_msg_ids = itertools.count(1)


def next_id() -> int:
    return next(_msg_ids)


def peer_of(chat: Any) -> Any:
    if isinstance(chat, types.User):
        return types.PeerUser(chat.id)
    if isinstance(chat, types.Chat):
        return types.PeerChat(chat.id)
    return types.PeerChannel(chat.id)


def new_message(
    chat: Any,
    sender: Any | None,
    text: str,
    *,
    msg_id: int | None = None,
    out: bool = False,
    entities: list[Any] | None = None,
    reply_to: int | None = None,
    mentioned: bool = False,
    media: Any = None,
    fwd_from: Any = None,
    post: bool = False,
    extra: tuple[Any, ...] = (),
) -> types.UpdateNewMessage | types.UpdateNewChannelMessage:
    """An update carrying one message, with the entities Telegram would attach."""
    msg = types.Message(
        id=msg_id if msg_id is not None else next_id(),
        peer_id=peer_of(chat),
        date=datetime.now(UTC),
        message=text,
        out=out,
        mentioned=mentioned,
        post=post,
        from_id=types.PeerUser(sender.id) if sender is not None else None,
        entities=entities,
        reply_to=types.MessageReplyHeader(reply_to_msg_id=reply_to) if reply_to else None,
        media=media,
        fwd_from=fwd_from,
    )
    cls = types.UpdateNewChannelMessage if isinstance(chat, types.Channel) else types.UpdateNewMessage
    update = cls(message=msg, pts=1, pts_count=1)
    return attach(update, chat, sender, *extra)


def attach(update: Any, *entities: Any) -> Any:
    update._entities = {utils.get_peer_id(e): e for e in entities if e is not None}
    return update


@dataclass
class Agent:
    """The agent side of the contract: records each message it is handed, with what the archive held then."""

    db: Database
    seen: list[IncomingMessage] = field(default_factory=list)
    archived_first: list[bool] = field(default_factory=list)
    delay: float = 0.0

    async def __call__(self, msg: IncomingMessage) -> None:
        row = await self.db.fetchone(
            "select 1 from tg_messages where chat_id = ? and message_id = ?", (msg.chat.id, msg.message_id)
        )
        self.archived_first.append(row is not None)
        self.seen.append(msg)
        if self.delay:
            await asyncio.sleep(self.delay)


def make_settings(**policy: Any) -> GatewaySettings:
    defaults: dict[str, Any] = dict(dm_policy="open", group_policy="open", admin_ids=[ADMIN.id], require_mention=True)
    defaults.update(policy)
    limits = {k: defaults.pop(k) for k in ("rate_limit_per_chat", "rate_limit_global") if k in defaults}
    return GatewaySettings(
        policy=PolicyConfig.build(**defaults),
        debounce=DebounceConfig(window_s=0.05, max_factor=3, max_messages=20),
        flood_wait_max_s=5,
        typing_indicator=False,
        **limits,
    )


@dataclass
class GatewayHarness:
    """Drives the real TelegramGateway: Telethon TL updates in, a recording client for what goes out."""

    client: RecordingClient
    gateway: TelegramGateway
    agent: Agent
    db: Database

    async def dispatch(self, *updates: Any) -> None:
        for update in updates:
            await self.client._dispatch_update(update)

    async def settle(self) -> None:
        await self.gateway.batcher.drain()
        assert self.gateway.dispatcher is not None
        await self.gateway.dispatcher.idle()

    async def rows(self, chat_id: int | None = None) -> list[Any]:
        if chat_id is None:
            return await self.db.fetchall("select * from tg_messages order by id")
        return await self.db.fetchall("select * from tg_messages where chat_id = ? order by id", (chat_id,))


async def make_harness(db: Database, **policy: Any) -> GatewayHarness:
    client = RecordingClient()
    gateway = TelegramGateway(client, db, make_settings(**policy))
    gateway.set_me(ME)
    agent = Agent(db)
    gateway.on_message(agent)
    gateway.install()
    # What Telegram would have told us about these peers before (the entity cache of a live session).
    client.session.process_entities(
        types.contacts.ResolvedPeer(
            peer=types.PeerUser(ALICE.id), chats=[GROUP, SUPERGROUP, CHANNEL], users=[ME, ALICE, BOB, OTHER_BOT, ADMIN]
        )
    )
    return GatewayHarness(client, gateway, agent, db)


@pytest.fixture
async def harness(db: Database):
    h = await make_harness(db)
    yield h
    await h.gateway.stop(grace_s=1)


class HashingEmbedder:
    """An EmbeddingProvider by feature hashing: words → 384 buckets, L2-normalised, on its own thread.

    Real vectors (similar texts are near) at a cost the 5,000-message burst can afford on two loaded cores;
    the local ONNX model is exercised by a smaller test and by scripts/bench_ingest.py.
    """

    model_id = "test-hashing-384"
    dims = 384

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-embed")

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.encode, list(texts))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % self.dims] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    def close(self) -> None:
        self._executor.shutdown(wait=False)
