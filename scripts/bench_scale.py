#!/usr/bin/env python
"""A heavy user's archive: 1M messages in 5,000 chats, and what the memory costs at that size.

Builds the archive once (or reuses it from ``--cache``): bench_search's synthetic chats (Zipf sizes: a few
groups of 100k, a long tail of DMs of a few dozen), every message with a vector of the real model for one of
a pool of sentences (one per 50 messages) plus a little noise, inserted as the archive does (the FTS trigger
runs). Then reports:

- the database's size per layer (``dbstat``), and the build's ingest rate (messages/s with their vectors);
- in a fresh process, as after a restart: the time to open the database, load the in-memory index and warm
  the readers (what the daemon does before it reports ready), the first all-chat search, then one-chat and
  all-chat search p50/p95 (``search_feed`` with a precomputed query vector) with CPU time per search, the
  vector leg's recall@30 against the exact top 30 (numpy over every float16 vector, computed outside the
  measured process), and the process's peak RSS.

The daemon's RSS under traffic over this archive: ``python scripts/soak.py --archive <db> --minutes 5``.

    python scripts/bench_scale.py                              # 1M / 5,000 chats, cached in ~/.cache
    python scripts/bench_scale.py --messages 100000            # 100k / 500 chats
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_search import COMMON, TOPICS, build, percentile  # noqa: E402

K = 30


def layers(path: Path) -> dict[str, float]:
    """MB per layer: the messages, their keyword index, their vectors, everything else."""
    from teleton.storage import connect
    from teleton.storage.sqlite_driver import pick_driver

    conn = connect(path, pick_driver())
    try:
        rows = conn.execute("select name, sum(pgsize) from dbstat group by name").fetchall()
        free = conn.execute("pragma freelist_count").fetchone()[0] * conn.execute("pragma page_size").fetchone()[0]
    finally:
        conn.close()
    out: dict[str, float] = {"free pages": free / 2**20}
    for name, size in rows:
        layer = (
            "keyword index" if name.startswith("tg_messages_fts")
            else "vectors" if name.startswith("tg_messages_vec") or "vec16" in name
            else "messages" if name.startswith("tg_messages") or name.startswith("sqlite_autoindex_tg_messages")
            else "other"
        )  # fmt: skip
        out[layer] = out.get(layer, 0.0) + size / 2**20
    return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


async def make(path: Path, messages: int) -> dict:
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.packaged import packaged_model
    from teleton.storage import Database

    embedder = LocalEmbedder(packaged_model())
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    db = await Database.open(partial, embedding=(embedder.model_id, embedder.dims))
    try:
        started = time.perf_counter()
        # One sentence per 50 messages at every size: the same share of near-copies as bench_search at 100k.
        chats = await build(db, messages, embedder, messages // 50, random.Random(messages))
        rate = messages / (time.perf_counter() - started)
    finally:
        await db.close()
    partial.rename(path)
    info = {"messages": messages, "chats": len(chats), "ingest_per_s": round(rate)}
    path.with_suffix(".json").write_text(json.dumps(info))
    return info


def measure(path: Path, queries: int) -> dict:
    """Runs in its own process: what a restarted daemon's searches cost (see ``--measure``)."""
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.packaged import packaged_model
    from teleton.process.threads import limit_blas_threads

    limit_blas_threads()
    embedder = LocalEmbedder(packaged_model())
    rng = random.Random(5)
    texts = [" ".join(rng.sample(TOPICS, 2) + rng.sample(COMMON, 2)) for _ in range(queries)]
    qvecs = embedder.encode_queries(texts)
    return asyncio.run(_measure(path, texts, qvecs))


async def _measure(path: Path, texts: list[str], qvecs: np.ndarray) -> dict:
    from teleton.memory.feed.embedding import load_index
    from teleton.memory.feed.search import prepare_search, search_feed
    from teleton.memory.search.corpora import FEED
    from teleton.memory.search.vector_leg import vector_leg
    from teleton.storage import Database

    started = time.perf_counter()
    db = await Database.open(path, embedding=("multilingual-e5-small-int8", 384))
    await load_index(db)  # what the daemon does before it reports ready
    await prepare_search(db)
    ready = time.perf_counter() - started
    try:
        chats = [int(r[0]) for r in await db.fetchall("select distinct chat_id from tg_messages")]
        rng = random.Random(9)
        t0 = time.perf_counter()
        await search_feed(db, texts[0], chat_ids=None, query_vector=qvecs[0])
        first = time.perf_counter() - t0
        timings: dict[str, list[float]] = {"chat": [], "all": []}
        cpu: dict[str, list[float]] = {"chat": [], "all": []}
        found: list[dict] = []
        for text, qvec in zip(texts, qvecs, strict=True):
            chat = rng.choice(chats)
            for name, scope in (("chat", [chat]), ("all", None)):
                c0, t0 = time.process_time(), time.perf_counter()
                await search_feed(db, text, chat_ids=scope, query_vector=qvec)
                timings[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
            legs = {}
            for name, scope in (("chat", [chat]), ("all", None)):
                hits = await db.read(lambda conn, v=qvec, s=scope: vector_leg(conn, FEED, v, K, s))
                legs[name] = sorted(hits)
            found.append({"chat_id": chat, **legs})
    finally:
        await db.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "ready_s": round(ready, 2),
        "first_all_chat_ms": round(first * 1000, 1),
        **{
            f"{name}_ms": {
                "p50": round(statistics.median(v) * 1000, 2),
                "p95": round(percentile(v, 0.95) * 1000, 2),
                "cpu_p50": round(statistics.median(cpu[name]) * 1000, 2),
            }
            for name, v in timings.items()
        },
        "peak_rss_mb": round(peak),
        "found": found,
    }


def recall(path: Path, qvecs: np.ndarray, found: list[dict]) -> dict[str, float]:
    """The vector leg's share of the exact top 30, one-chat and all-chat, over every stored vector."""
    from teleton.storage import connect
    from teleton.storage.sqlite_driver import pick_driver

    conn = connect(path, pick_driver())
    ids, scopes, scores = [], [], []
    try:
        cursor = conn.execute("select id, scope, vector from tg_messages_vec16")
        while batch := cursor.fetchmany(50_000):
            matrix = np.frombuffer(b"".join(r[2] for r in batch), np.float16).reshape(len(batch), -1)
            ids.append(np.array([r[0] for r in batch]))
            scopes.append(np.array([r[1] for r in batch]))
            scores.append(matrix.astype(np.float32) @ qvecs.T)
    finally:
        conn.close()
    all_ids, all_scopes, all_scores = np.concatenate(ids), np.concatenate(scopes), np.concatenate(scores)
    shares: dict[str, list[float]] = {"chat": [], "all": []}
    for q, seen in enumerate(found):
        for name in ("chat", "all"):
            rows = np.arange(len(all_ids)) if name == "all" else np.flatnonzero(all_scopes == seen["chat_id"])
            exact = set(all_ids[rows[np.argsort(-all_scores[rows, q])[:K]]].tolist())
            shares[name].append(len(exact & set(seen[name])) / len(exact))
    return {name: round(float(np.mean(v)), 3) for name, v in shares.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="chats: one per 200 messages")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "teleton-bench")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the measured child process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.queries)))
        return 0
    args.cache.mkdir(parents=True, exist_ok=True)
    path = args.cache / f"scale-{args.messages}.db"
    if path.exists():
        info = json.loads(path.with_suffix(".json").read_text())
        print(f"reusing {path}")
    else:
        print(f"building {path} ...", flush=True)
        info = asyncio.run(make(path, args.messages))
    print(json.dumps(info))
    print("database MB per layer:", json.dumps(layers(path)), f"file {path.stat().st_size / 2**20:.0f} MB")
    child = subprocess.run(
        [sys.executable, __file__, "--measure", str(path), "--queries", str(args.queries)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(child.stdout.strip().splitlines()[-1])
    found = result.pop("found")
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.packaged import packaged_model

    rng = random.Random(5)
    texts = [" ".join(rng.sample(TOPICS, 2) + rng.sample(COMMON, 2)) for _ in range(args.queries)]
    qvecs = LocalEmbedder(packaged_model()).encode_queries(texts)
    result["vector_recall_at_30"] = recall(path, qvecs, found)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
