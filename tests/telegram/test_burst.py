"""5,000 messages across 50 chats through the real handlers: archived once each, the loop never stalls."""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from teleton.storage import Database
from tests.telegram.burst import Burst, LagMeter, feed, settle_heap
from tests.telegram.conftest import HashingEmbedder, make_harness

TOTAL, CHATS = 5000, 50


async def test_burst_archives_everything_once_without_stalling_the_loop(db: Database) -> None:
    h = await make_harness(db, require_mention=False, rate_limit_per_chat=10_000, rate_limit_global=100_000)
    try:
        burst = Burst(TOTAL, CHATS)
        # Every 10th update is delivered twice, as after a reconnect.
        updates = itertools.chain(burst.updates(), burst.updates(range(0, TOTAL, 10)))
        settle_heap()
        meter = LagMeter().start()
        start = time.monotonic()
        await feed(h.client, updates)
        await h.settle()
        elapsed = time.monotonic() - start
        worst = await meter.stop()

        count, distinct, chats = tuple(
            await db.fetchone(
                "select count(*), count(distinct chat_id || ':' || message_id), count(distinct chat_id) "
                "from tg_messages"
            )
        )
        assert (count, distinct, chats) == (TOTAL, TOTAL, CHATS)
        fts = await db.fetchone("select count(*) from tg_messages_fts where tg_messages_fts match 'coffee'")
        assert fts[0] == TOTAL // 10
        assert worst < 0.100, f"event loop stalled {worst * 1000:.0f} ms"
        # Every message reached the gate once: DMs one turn each, groups debounced into fewer turns.
        assert all(h.agent.archived_first)
        dm_turns = [m for m in h.agent.seen if m.chat.type == "dm"]
        assert len(dm_turns) == TOTAL // 2
        group_msgs = sum(1 + len(m.earlier_context) for m in h.agent.seen if m.chat.type == "group")
        assert group_msgs == TOTAL // 2
        print(
            f"\nburst: {TOTAL} msgs in {elapsed:.2f}s, worst loop lag {worst * 1000:.1f} ms, "
            f"{h.gateway.batcher.batches} commits"
        )
    finally:
        gc.unfreeze()
        await h.gateway.stop(grace_s=1)


@pytest.fixture(scope="module")
def local_model():
    """The default local model (all-MiniLM-L6-v2, int8 ONNX), offline from its package. One thread, so a
    core stays free for the event loop (ONNX Runtime's workers spin)."""
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.model_files import packaged_model

    provider = LocalEmbedder(packaged_model(), threads=1)
    yield provider
    provider.close()


async def _burst_with_embeddings(
    tmp_path: Path, provider: Any, total: int, chats: int, *, max_lag_s: float = 0.100
) -> tuple[float, float, float]:
    db = await Database.open(tmp_path / "vec.db", embedding=(provider.model_id, provider.dims))
    assert db.vectors
    h = await make_harness(db, require_mention=False, rate_limit_per_chat=10_000, rate_limit_global=100_000)
    h.gateway.pipeline.start_embedder(provider)
    try:
        settle_heap()
        meter = LagMeter().start()
        start = time.monotonic()
        await feed(h.client, Burst(total, chats).updates())
        await h.gateway.batcher.drain()
        archived_s = time.monotonic() - start
        deadline = time.monotonic() + 120
        pending = total
        while pending and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            pending = (await db.fetchone("select count(*) from tg_messages where embedded = 0"))[0]
        embedded_s = time.monotonic() - start
        worst = await meter.stop()
        assert pending == 0
        count, distinct = tuple(
            await db.fetchone("select count(*), count(distinct chat_id || ':' || message_id) from tg_messages")
        )
        assert count == distinct == total
        vectors = (await db.fetchone("select count(*) from tg_messages_vec"))[0]
        assert vectors == total  # every message has its embedding
        hits = await db.fetchall(
            "select count(*) from tg_messages_vec where embedding match ? and k = 5 and chat_id = ?",
            (np.asarray(await provider.embed(["message about the coffee"]), dtype=np.float32)[0].tobytes(), 300_000),
        )
        assert hits[0][0] == 5  # the vectors answer a scoped KNN query
        assert worst < max_lag_s, f"event loop stalled {worst * 1000:.0f} ms"
        return archived_s, embedded_s, worst
    finally:
        gc.unfreeze()
        await h.gateway.stop(grace_s=1)
        await db.close()


async def test_burst_embeddings_all_present_after_the_worker_drains(tmp_path: Path) -> None:
    provider = HashingEmbedder()
    try:
        archived_s, embedded_s, worst = await _burst_with_embeddings(tmp_path, provider, TOTAL, CHATS)
    finally:
        provider.close()
    assert archived_s < embedded_s
    print(
        f"\nburst+embeddings: archived in {archived_s:.2f}s, all embedded after {embedded_s:.1f}s, "
        f"worst loop lag {worst * 1000:.1f} ms"
    )


async def test_local_model_embeds_the_feed_in_the_background(tmp_path: Path, local_model: Any) -> None:
    # ONNX Runtime alone, with no archive work at all, shows 20-80 ms scheduler stalls on this shared
    # 2-core machine under load; the 100 ms bound is held by the burst test above, this one checks the model.
    archived_s, embedded_s, worst = await _burst_with_embeddings(tmp_path, local_model, 300, 10, max_lag_s=0.5)
    print(
        f"\nlocal model: 300 msgs archived in {archived_s:.2f}s, embedded after {embedded_s:.1f}s, "
        f"worst loop lag {worst * 1000:.1f} ms"
    )
