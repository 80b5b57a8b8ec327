"""5,000 messages across 50 chats through the real handlers: archived once each, the loop never stalls."""

from __future__ import annotations

import gc
import time

from teleton.storage import Database
from tests.telegram.burst import LagMeter, burst_updates, feed
from tests.telegram.conftest import make_harness

TOTAL, CHATS = 5000, 50


async def test_burst_archives_everything_once_without_stalling_the_loop(db: Database) -> None:
    h = await make_harness(db, require_mention=False, rate_limit_per_chat=10_000, rate_limit_global=100_000)
    try:
        updates = burst_updates(TOTAL, CHATS)
        replays = updates[::10]  # 500 updates delivered twice, as after a reconnect
        # The 5,500 pre-built updates stand in for bytes on the network, which live are not Python objects:
        # keep them out of the collector so its full passes measure the daemon, not the test's input.
        gc.collect()
        gc.freeze()
        meter = LagMeter().start()
        start = time.monotonic()
        await feed(h.client, updates + replays)
        await h.settle()
        elapsed = time.monotonic() - start
        worst = await meter.stop()

        count, distinct, chats = tuple(await db.fetchone(
            "select count(*), count(distinct chat_id || ':' || message_id), count(distinct chat_id) from tg_messages"
        ))
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
        print(f"\nburst: {TOTAL} msgs in {elapsed:.2f}s, worst loop lag {worst * 1000:.1f} ms, "
              f"{h.gateway.batcher.batches} commits")
    finally:
        gc.unfreeze()
        await h.gateway.stop(grace_s=1)
