"""5,000 messages across 50 chats through the real handlers: archived once each, every message reaches the gate
once, and embeddings never hold up the receive path. How fast, and how long the event loop may stall meanwhile,
is measured by scripts/bench_ingest.py (not asserted here: the suite runs on busy machines)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teleton.daemon.memory_tuning import settle_after_start
from teleton.memory.feed.embedding import FeedEmbedder
from teleton.memory.search.corpora import FEED
from teleton.memory.search.vector_leg import vector_leg
from teleton.storage import Database
from tests.telegram.burst import Burst, feed
from tests.telegram.conftest import HashingEmbedder, make_harness
from tests.waiting import until

TOTAL, CHATS = 5000, 50


async def test_burst_archives_everything_once_and_offers_each_message_once(db: Database) -> None:
    h = await make_harness(db, require_mention=False, rate_limit_per_chat=10_000, rate_limit_global=100_000)
    try:
        burst = Burst(TOTAL, CHATS)
        # Every 10th update is delivered twice, as after a reconnect.
        updates = itertools.chain(burst.updates(), burst.updates(range(0, TOTAL, 10)))
        settle_after_start()
        await feed(h.client, updates)
        await h.settle()

        count, distinct, chats = tuple(
            await db.fetchone(
                "select count(*), count(distinct chat_id || ':' || message_id), count(distinct chat_id) "
                "from tg_messages"
            )
        )
        assert (count, distinct, chats) == (TOTAL, TOTAL, CHATS)
        fts = await db.fetchone("select count(*) from tg_messages_fts where tg_messages_fts match 'coffee'")
        assert fts[0] == TOTAL // 10
        # Every message reached the gate once: DMs one turn each, groups debounced into fewer turns.
        assert all(h.agent.archived_first)
        dm_turns = [m for m in h.agent.seen if m.chat.type == "dm"]
        assert len(dm_turns) == TOTAL // 2
        group_msgs = sum(1 + len(m.earlier_context) for m in h.agent.seen if m.chat.type == "group")
        assert group_msgs == TOTAL // 2
    finally:
        gc.unfreeze()
        await h.gateway.stop(grace_s=1)


@pytest.fixture(scope="module")
def local_model():
    """The default local model (multilingual-e5-small, int8 ONNX), offline from the run's model cache. One
    thread, so a core stays free for the event loop (ONNX Runtime's workers spin)."""
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.packaged import packaged_model

    provider = LocalEmbedder(packaged_model(), threads=1)
    yield provider
    provider.close()


class HeldEmbedder:
    """A provider whose every ``embed`` waits until ``release`` is set, then asks the real one."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.model_id, self.dims = provider.model_id, provider.dims
        self.release = asyncio.Event()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        await self.release.wait()
        return await self.provider.embed(texts)


async def _embedded(db: Database) -> tuple[int, int]:
    """(embedded, not yet embedded) messages."""
    row = await db.fetchone("select count(*) filter (where embedded = 1), count(*) filter (where embedded = 0) "
                            "from tg_messages")  # fmt: skip
    return int(row[0]), int(row[1])


async def _all_embedded(db: Database) -> bool:
    return (await _embedded(db))[1] == 0


async def _burst_with_embeddings(tmp_path: Path, provider: Any, total: int, chats: int) -> None:
    db = await Database.open(tmp_path / "vec.db", embedding=(provider.model_id, provider.dims))
    assert db.vectors
    h = await make_harness(db, require_mention=False, rate_limit_per_chat=10_000, rate_limit_global=100_000)
    held = HeldEmbedder(provider)
    feed_embedder = FeedEmbedder(db, held)
    feed_embedder.start()
    h.gateway.pipeline.on_archived = feed_embedder.notify  # as the daemon wires it (gateway.on_message)
    try:
        settle_after_start()
        await feed(h.client, Burst(total, chats).updates())
        await h.gateway.batcher.drain()
        # The whole burst is archived while no embedding can finish: the receive path never waits for them.
        assert await _embedded(db) == (0, total)
        held.release.set()
        await until(lambda: _all_embedded(db), interval_s=0.1)
        count, distinct = tuple(
            await db.fetchone("select count(*), count(distinct chat_id || ':' || message_id) from tg_messages")
        )
        assert count == distinct == total
        vectors = (await db.fetchone("select count(*) from tg_messages_vec16"))[0]
        assert vectors == total  # every message has its embedding
        query = np.asarray(await provider.embed(["message about the coffee"]), dtype=np.float32)[0]
        hits = await db.read(lambda conn: vector_leg(conn, FEED, query, 5, [300_000]))
        chats = await db.fetchall(
            "select distinct chat_id from tg_messages where id in (select value from json_each(?))",
            (json.dumps(list(hits)),),
        )
        assert len(hits) == 5 and [tuple(c) for c in chats] == [
            (300_000,)
        ]  # the vectors answer a search within one chat
    finally:
        held.release.set()
        gc.unfreeze()
        await h.gateway.stop(grace_s=1)
        await feed_embedder.stop()
        await db.close()


async def test_burst_embeddings_all_present_after_the_worker_drains(tmp_path: Path) -> None:
    provider = HashingEmbedder()
    try:
        await _burst_with_embeddings(tmp_path, provider, TOTAL, CHATS)
    finally:
        provider.close()


async def test_local_model_embeds_the_feed_in_the_background(tmp_path: Path, local_model: Any) -> None:
    await _burst_with_embeddings(tmp_path, local_model, 300, 10)
