#!/usr/bin/env python
"""Feed search and embedding benchmark on synthetic chat archives (10k and 100k messages).

For each size, a fresh database gets N messages in tg_messages spread over many chats (a few busy ones,
a long tail of small ones), inserted the way the archive does (the FTS trigger runs). Then:
- embedding throughput: the real local model, texts/s, on LoCoMo-length chat turns (the raw turns, and the
  feed's index texts, which carry two messages of context);
- single query embedding latency (p50);
- search latency p50/p95 of ``feed_search.search_feed`` with a precomputed query vector (the search alone),
  scoped to one chat and across all chats, and with the query embedding included (``chat+embed``);
- the all-chat vector leg's recall@30 against the exact nearest 30 (a brute-force scan of the same rows as
  float32 on one BLAS thread, also timed: the floor an all-chat search is held to);
- process CPU per search, every thread's, over the search and a pause after it (``--pause-ms``), with numpy's
  default BLAS threading unless ``--one-blas-thread``: a BLAS pool that busy-waits after a call shows here.

Embedding 100k messages with the real model would take tens of minutes, so only ``--embed-sample`` messages
go through ``embed_pending``; the other rows get vectors of the same model for a pool of distinct sentences
(plus a little noise), which is what the KNN cost depends on.

Usage: python scripts/bench_search.py [--sizes 10000 100000 1000000] [--queries 200] [--locomo PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.feed.embedding import FeedMessage, embed_pending, index_text
from teleton.memory.feed.search import search_feed
from teleton.memory.search import bit_index
from teleton.memory.search.corpora import FEED
from teleton.memory.search.vector_leg import vector_leg
from teleton.memory.search.vector_store import write_vectors
from teleton.process.logging import configure_logging
from teleton.process.threads import limit_blas_threads
from teleton.storage.database import Database

COMMON = (
    "i you we they it is was be have do go get make know think see come want look use find give tell work call "
    "try ask need feel become leave put mean keep let begin seem help talk turn start show hear play run move "
    "like live believe bring happen write sit stand lose pay meet include continue set learn change lead "
    "understand watch follow stop create speak read spend grow open walk win offer remember love consider "
    "appear buy wait serve die send expect build stay fall cut reach kill remain today tomorrow yesterday week "
    "weekend morning night really very just also still maybe yes no ok thanks great good nice cool sure"
).split()
TOPICS = (
    "football match goal coffee tea dinner pizza sushi train flight airport hotel beach mountain hike bike car "
    "garage meeting deadline project release bug server database python rust invoice payment salary bank rent "
    "apartment kitchen garden tomato cat dog vet doctor dentist birthday party gift concert guitar piano movie "
    "series book novel exam course university school kids weather rain snow holiday lisbon paris berlin tokyo "
    "wedding photo camera phone laptop charger battery keyboard monitor game chess poker recipe bread cake"
).split()


def synthetic_sentence(rng: random.Random) -> str:
    words = [rng.choice(COMMON) for _ in range(rng.randint(4, 12))]
    for _ in range(rng.randint(1, 3)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(TOPICS))
    return " ".join(words).capitalize() + rng.choice([".", "!", "?", "", " :)"])


def chat_sizes(total: int, chats: int, rng: random.Random) -> list[int]:
    weights = [1.0 / (rank + 1) for rank in range(chats)]  # Zipf: a few busy chats, a long tail
    scale = total / sum(weights)
    sizes = [max(1, int(w * scale)) for w in weights]
    sizes[0] += total - sum(sizes)
    rng.shuffle(sizes)
    return sizes


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def build(db: Database, total: int, embedder: LocalEmbedder, pool: int, rng: random.Random) -> list[int]:
    chats = max(20, total // 200)
    sizes = chat_sizes(total, chats, rng)
    sentences = [synthetic_sentence(rng) for _ in range(pool)]
    vectors = embedder.encode(sentences)

    def insert(conn) -> None:
        row_id = 0
        for chat_index, size in enumerate(sizes):
            chat_id = 1000 + chat_index
            t = 1_700_000_000.0 + rng.random() * 1e6
            rows = []
            for n in range(size):
                k = rng.randrange(pool)
                t += rng.expovariate(1 / 600)
                cur = conn.execute(
                    "insert into tg_messages(chat_id, message_id, sender_name, date, text, embedded) "
                    "values (?, ?, ?, ?, ?, 1)",
                    (chat_id, n + 1, f"user{rng.randrange(50)}", t, sentences[k]),
                )
                row_id = int(cur.lastrowid)
                noisy = vectors[k] + np.random.default_rng(row_id).normal(0, 0.02, vectors.shape[1])
                rows.append((row_id, chat_id, (noisy / np.linalg.norm(noisy)).astype(np.float32)))
            write_vectors(conn, FEED, rows)

    await db.write(insert)
    return [1000 + i for i in range(chats)]


def turn_texts(locomo: Path | None, rng: random.Random, count: int) -> list[str]:
    if locomo is not None and locomo.exists():
        samples = json.loads(locomo.read_text())
        turns = [
            f"[{t['speaker']}] {t['text']}"
            for s in samples
            for key, value in s["conversation"].items()
            if key.startswith("session_") and isinstance(value, list)
            for t in value
        ]
        return turns[:count]
    # LoCoMo turns average ~120 characters; two synthetic sentences come close.
    return [synthetic_sentence(rng) + " " + synthetic_sentence(rng) for _ in range(count)]


def embed_throughput(embedder: LocalEmbedder, texts: list[str]) -> float:
    embedder.encode(texts[:64])  # warm-up
    started = time.perf_counter()
    embedder.encode(texts)
    return len(texts) / (time.perf_counter() - started)


async def bench_size(args: argparse.Namespace, embedder: LocalEmbedder, total: int) -> dict:
    rng = random.Random(total)
    with tempfile.TemporaryDirectory() as tmp:
        db = await Database.open(Path(tmp) / "bench.db", embedding=(embedder.model_id, embedder.dims))
        try:
            started = time.perf_counter()
            chats = await build(db, total, embedder, args.pool, rng)
            build_s = time.perf_counter() - started

            # Real indexing path: mark a sample pending and let the feed worker embed it.
            await db.execute("update tg_messages set embedded = 0 where id <= ?", (args.embed_sample,))
            started = time.perf_counter()
            embedded = await embed_pending(db, embedder, batch=64)
            index_rate = embedded / (time.perf_counter() - started)

            queries = [" ".join(rng.sample(TOPICS, 2) + rng.sample(COMMON, 2)) for _ in range(args.queries)]
            qvecs = embedder.encode_queries(queries)
            results: dict[str, list[float]] = {"chat": [], "all": [], "chat+embed": [], "embed": [], "exact_knn": []}
            cpu: dict[str, list[float]] = {"chat": [], "all": []}
            exacts, recalls = [], []
            stored = await db.read(all_vectors)
            for query, qvec in zip(queries, qvecs, strict=True):
                with threadpool_limits(1, "blas"):  # the floor: one core, as a search runs
                    t0 = time.perf_counter()
                    exact = exact_knn(stored, qvec, 30)
                    results["exact_knn"].append(time.perf_counter() - t0)
                exacts.append(exact)
                found = await db.read(lambda conn, v=qvec: vector_leg(conn, FEED, v, 30, None))
                recalls.append(len(exact & set(found)) / len(exact))
                chat = rng.choice(chats)
                for name, scope in (("chat", [chat]), ("all", None)):
                    c0, t0 = time.process_time(), time.perf_counter()
                    await search_feed(db, query, chat_ids=scope, query_vector=qvec)
                    results[name].append(time.perf_counter() - t0)
                    await asyncio.sleep(args.pause_ms / 1000)  # a thread spinning after the search shows here
                    cpu[name].append(time.process_time() - c0)  # every thread's
                t0 = time.perf_counter()
                await embedder.embed([query])
                results["embed"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await search_feed(db, query, chat_ids=[chat], provider=embedder)
                results["chat+embed"].append(time.perf_counter() - t0)
            sweep = await oversample_sweep(db, qvecs, exacts, args.oversample) if args.oversample else {}
            return {
                "messages": total,
                "chats": len(chats),
                "build_s": round(build_s, 1),
                "index_texts_per_s": round(index_rate, 1),
                "all_chat_vector_recall_at_30": {"mean": round(statistics.mean(recalls), 3), "min": min(recalls)},
                "oversample_sweep": sweep,
                **{
                    f"{name}_ms": {
                        "p50": round(statistics.median(v) * 1000, 2),
                        "p95": round(percentile(v, 0.95) * 1000, 2),
                    }
                    for name, v in results.items()
                },
                **{f"{name}_cpu_ms_p50": round(statistics.median(v) * 1000, 2) for name, v in cpu.items()},
                **{
                    f"{name}_cpu_per_wall": round(statistics.median(cpu[name]) / statistics.median(results[name]), 2)
                    for name in cpu
                },
                "all_p50_per_exact_scan": round(
                    statistics.median(results["all"]) / statistics.median(results["exact_knn"]), 2
                ),
            }
        finally:
            await db.close()


async def oversample_sweep(db: Database, qvecs: np.ndarray, exact: list[set[int]], values: list[int]) -> dict:
    """Recall@30 (against ``exact``, the true nearest 30 of each query) and time of the all-chat vector leg
    alone for each 1-bit oversample factor."""
    default, report = bit_index.OVERSAMPLE, {}
    try:
        for value in values:
            bit_index.OVERSAMPLE = value
            recalls, times = [], []
            for vector, truth in zip(qvecs, exact, strict=True):
                t0 = time.perf_counter()
                found = await db.read(lambda conn, v=vector: vector_leg(conn, FEED, v, 30, None))
                times.append(time.perf_counter() - t0)
                recalls.append(len(truth & set(found)) / len(truth))
            report[value] = {
                "recall_mean": round(statistics.mean(recalls), 3),
                "recall_min": round(min(recalls), 3),
                "p95_ms": round(percentile(times, 0.95) * 1000, 2),
            }
    finally:
        bit_index.OVERSAMPLE = default
    return report


def all_vectors(conn) -> tuple[np.ndarray, np.ndarray]:
    """Every message's id and its stored (float16) vector, as float32, for the exact scan."""
    rows = conn.execute(f"select id, vector from {FEED.vec}").fetchall()
    matrix = np.frombuffer(b"".join(r[1] for r in rows), np.float16).reshape(len(rows), -1).astype(np.float32)
    return np.array([r[0] for r in rows]), matrix


def exact_knn(stored: tuple[np.ndarray, np.ndarray], vector: np.ndarray, k: int) -> set[int]:
    """The exact ``k`` nearest messages of all chats: a brute-force scan of every stored vector."""
    ids, matrix = stored
    return set(ids[np.argpartition(-(matrix @ vector), k)[:k]].tolist())


async def bench_reindex(embedder: LocalEmbedder, chunks: int = 1000) -> dict:
    """Time a re-index of an unchanged knowledge base of ``chunks`` chunks (nothing may be embedded)."""
    from teleton.memory.knowledge.index import KnowledgeIndex

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        per_file = 100
        for f in range(chunks // per_file):
            body = "".join(f"## Note {f}-{i}\n\n" + "remember this detail " * 22 + "\n\n" for i in range(per_file))
            (ws / "memory" / f"notes{f}.md").write_text(body)
        db = await Database.open(Path(tmp) / "kb.db", embedding=(embedder.model_id, embedder.dims))
        try:
            index = KnowledgeIndex(db, ws, embedder)
            first = await index.reindex()
            timings = []
            for _ in range(5):
                started = time.perf_counter()
                again = await index.reindex()
                timings.append(time.perf_counter() - started)
            return {
                "chunks": first.added,
                "embedded_first": first.embedded,
                "embedded_again": again.embedded,
                "unchanged_reindex_ms": round(statistics.median(timings) * 1000, 1),
            }
        finally:
            await db.close()


async def main_async(args: argparse.Namespace) -> dict:
    embedder = LocalEmbedder(packaged_model(args.model))
    rng = random.Random(7)
    turns = turn_texts(args.locomo, rng, args.turns)
    contexts = [
        index_text(
            FeedMessage(i, 1, "", t, 0.0), [FeedMessage(j, 1, "", turns[j], 0.0) for j in range(max(0, i - 2), i)]
        )
        for i, t in enumerate(turns)
    ]
    single = []
    for text in turns[:100]:
        t0 = time.perf_counter()
        embedder.encode_queries([text])
        single.append(time.perf_counter() - t0)
    report = {
        "embed_turns_per_s": round(embed_throughput(embedder, turns), 1),
        "embed_index_texts_per_s": round(embed_throughput(embedder, contexts), 1),
        "query_embed_p50_ms": round(statistics.median(single) * 1000, 2),
        "knowledge": await bench_reindex(embedder),
        "sizes": [await bench_size(args, embedder, size) for size in args.sizes],
    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pool", type=int, default=2000, help="distinct sentences embedded for the corpus")
    parser.add_argument("--embed-sample", type=int, default=1000, help="messages embedded through embed_pending")
    parser.add_argument("--turns", type=int, default=1000, help="turns for the throughput measurement")
    parser.add_argument("--oversample", type=int, nargs="*", default=[], help="1-bit oversample factors to sweep")
    parser.add_argument("--locomo", type=Path, default=Path("../shared/eval/locomo-dev.json"))
    parser.add_argument("--model", help="a packaged local model (default: multilingual-e5-small; all-MiniLM-L6-v2)")
    parser.add_argument("--pause-ms", type=float, default=40, help="pause after each search, counted in its CPU")
    parser.add_argument("--one-blas-thread", action="store_true", help="limit BLAS as the `teleton` command does")
    args = parser.parse_args()
    configure_logging("info", "console", stream=sys.stderr)  # stdout carries the results only
    if args.one_blas_thread:
        limit_blas_threads()
    print(json.dumps(asyncio.run(main_async(args)), indent=2))


if __name__ == "__main__":
    main()
