"""Feed archive throughput: real Telethon updates through the real handlers into a real SQLite file.

    /tmp/probe/bin/python scripts/bench_ingest.py [--messages 20000] [--chats 100]

Two runs: archive only, then archive while the feed embedding worker embeds in the background (the
receive path never waits for embeddings). Reports messages/s archived (first update dispatched → last
commit), the worst event-loop stall, commits used, and for the second run how long the worker took to
embed everything. The floor is 2,000 messages/s archived.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from teleton.daemon.memory_tuning import settle_after_start  # noqa: E402
from teleton.memory.feed.embedding import FeedEmbedder  # noqa: E402
from teleton.storage import Database  # noqa: E402
from tests.telegram.burst import Burst, LagMeter, feed  # noqa: E402
from tests.telegram.conftest import make_harness  # noqa: E402

FLOOR = 2000.0


def load_provider(threads: int | None) -> Any:
    """The default local model (multilingual-e5-small, int8 ONNX, offline; built at its first use)."""
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.packaged import packaged_model

    return LocalEmbedder(packaged_model(), threads=threads)


async def run(total: int, chats: int, provider: Any | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        emb = (provider.model_id, provider.dims) if provider is not None else None
        db = await Database.open(Path(tmp) / "bench.db", embedding=emb)
        h = await make_harness(db, require_mention=False, rate_limit_per_chat=10**6, rate_limit_global=10**6)
        if provider is not None:
            feed_embedder = FeedEmbedder(db, provider)
            feed_embedder.start()
            h.gateway.pipeline.on_archived = feed_embedder.notify  # the daemon's wiring: woken by each commit
        turns = 0

        async def agent(msg: Any) -> None:  # counts, keeps nothing: the heap stays the daemon's own
            nonlocal turns
            turns += 1

        h.gateway.dispatcher.handler = agent
        settle_after_start()  # as the daemon does once it is ready
        meter = LagMeter().start()
        start = time.perf_counter()
        await feed(h.client, Burst(total, chats).updates())  # built as they "arrive", like network reads
        await h.gateway.batcher.drain()
        archived_s = time.perf_counter() - start
        await h.gateway.dispatcher.idle()
        result = {
            "messages": total,
            "archive_s": archived_s,
            "msgs_per_s": total / archived_s,
            "commits": h.gateway.batcher.batches,
        }
        if provider is not None:
            while (await db.fetchone("select count(*) from tg_messages where embedded = 0"))[0]:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
            result["embed_all_s"] = time.perf_counter() - start
            result["embedded_per_s"] = total / result["embed_all_s"]
        result["worst_lag_ms"] = await meter.stop() * 1000
        count = (await db.fetchone("select count(*) from tg_messages"))[0]
        assert count == total, f"archived {count} of {total}"
        gc.unfreeze()
        await h.gateway.stop(grace_s=1)
        await db.close()
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument(
        "--embed-messages",
        type=int,
        default=2_000,
        help="messages for the run with embeddings (the model is the slow part)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=max(1, (os.cpu_count() or 2) - 1),
        help="ONNX Runtime threads (default: all cores but one, left to the event loop)",
    )
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    plain = asyncio.run(run(args.messages, args.chats, None))
    print(
        f"archive only:      {plain['msgs_per_s']:8.0f} msgs/s  ({plain['messages']} msgs in "
        f"{plain['archive_s']:.2f} s, {plain['commits']} commits, worst loop lag {plain['worst_lag_ms']:.1f} ms)"
    )
    if importlib.util.find_spec("teleton.memory.feed.embedding") is None:
        print("with embeddings:   skipped (teleton.memory.feed.embedding is not there yet)")
    else:
        emb = asyncio.run(run(args.embed_messages, args.chats, load_provider(args.threads)))
        print(
            f"with embeddings:   {emb['msgs_per_s']:8.0f} msgs/s archived ({emb['messages']} msgs in "
            f"{emb['archive_s']:.2f} s, worst loop lag {emb['worst_lag_ms']:.1f} ms); all embedded after "
            f"{emb['embed_all_s']:.1f} s ({emb['embedded_per_s']:.0f} msgs/s)"
        )
        if emb["msgs_per_s"] < FLOOR:
            raise SystemExit(f"below the floor of {FLOOR:.0f} msgs/s with embeddings")
    if plain["msgs_per_s"] < FLOOR:
        raise SystemExit(f"below the floor of {FLOOR:.0f} msgs/s")


if __name__ == "__main__":
    main()
