"""Overhead of one agent turn, excluding the model: from ``agent.handle(msg)`` to the request arriving at the
Messages API, with a 100k-message archive. Everything is real (SQLite + FTS5 + sqlite-vec, the runtime, tool
RAG, the anthropic SDK over HTTP) except the model, which is the scripted server of the test suite.

    python scripts/bench_turn.py                     # keyword-only retrieval
    python scripts/bench_turn.py --vectors           # + local MiniLM query embedding, 100k random vectors
    python scripts/bench_turn.py --messages 100000 --turns 300 --floor-ms 60
    python scripts/bench_turn.py --vectors --db /tmp/bench.db   # build the archive once, reuse it after

Reports p50 / p95 / max per chat kind (the owner's DM searches every chat; a group only itself) and exits 1
when a p95 is over ``--floor-ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console

from teleton.agent.factory import build_agent
from teleton.config.schema import (
    AgentConfig,
    Config,
    EmbeddingConfig,
    MemoryConfig,
    StorageConfig,
    TelegramConfig,
)
from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.gateway.terminal import TerminalGateway
from teleton.memory import feed_archive as fa
from teleton.memory.corpora import FEED
from teleton.memory.vector_store import write_vectors
from teleton.observability.logging import configure_logging
from teleton.storage import Database
from tests.fakes.anthropic_server import FakeAnthropic, text

OWNER = UserInfo(id=4242, first_name="Olga", username="olga")
ALICE = UserInfo(id=5151, first_name="Alice")
GROUP = ChatInfo(id=-100_000_007, type="group", title="Bench group")
QUESTIONS = [
    "what did we decide about the cabin trip in march?",
    "who recommended the book about sailing and what was it called",
    "remind me of the wifi password and the door code",
    "any news about the garden project or the tomatoes?",
    "what time is the dentist appointment next week",
    "summarise what the chess club said about the tournament",
]


def words(rng: random.Random, vocabulary: list[str], n: int) -> str:
    return " ".join(rng.choice(vocabulary) for _ in range(n))


async def fill_archive(db: Database, count: int, chats: int, vectors: bool, dims: int) -> None:
    rng = random.Random(7)
    vocabulary = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ri") for b in range(300)]
    vocabulary += [w for q in QUESTIONS for w in q.split()]
    chat_ids = [GROUP.id, OWNER.id] + [-100_000_100 - i for i in range(chats - 2)]
    now = time.time()
    batch = 10_000
    for start in range(0, count, batch):
        records = []
        for i in range(start, min(count, start + batch)):
            chat_id = chat_ids[i % len(chat_ids)]
            records.append(
                fa.MessageRecord(
                    chat_id=chat_id,
                    message_id=i + 1,
                    date=now - (count - i) * 30,
                    text=words(rng, vocabulary, rng.randint(6, 24)),
                    sender_id=1000 + i % 50,
                    sender_name=f"user{i % 50}",
                )
            )

        def _write(conn: Any, records: list[fa.MessageRecord] = records) -> None:
            for chat_id in {r.chat_id for r in records}:
                kind = "dm" if chat_id > 0 else "group"
                fa.upsert_chat(conn, fa.ChatRecord(id=chat_id, type=kind, title=str(chat_id)), now)
            for record in records:
                row = fa.insert_message(conn, record)
                if vectors:
                    vector = np.random.default_rng(row.row_id).standard_normal(dims).astype(np.float32)
                    write_vectors(conn, FEED, [(row.row_id, record.chat_id, vector / np.linalg.norm(vector))])

        await db.write(_write)


def embedder_or_none(use_vectors: bool) -> Any:
    if not use_vectors:
        return None
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.model_files import packaged_model

    return LocalEmbedder(packaged_model())


async def bench(args: argparse.Namespace) -> int:
    configure_logging("warning")
    workdir = Path(tempfile.mkdtemp(prefix="teleton-bench-"))
    db_path = args.db or workdir / "bench.db"
    embedder = embedder_or_none(args.vectors)
    embedding = (embedder.model_id, embedder.dims) if embedder is not None else None
    db = await Database.open(db_path, embedding=embedding)
    archived = int((await db.fetchone("select count(*) from tg_messages where message_id <= ?", (args.messages,)))[0])
    if archived < args.messages:
        started = time.perf_counter()
        await fill_archive(db, args.messages, args.chats, embedder is not None, getattr(embedder, "dims", 384))
        print(
            f"archive: {args.messages:,} messages in {args.chats} chats, built in "
            f"{time.perf_counter() - started:.1f}s (vectors: {'yes' if embedder is not None else 'no'})"
        )
    else:
        print(f"archive: reusing {archived:,} messages in {db_path}")

    received: list[float] = []
    with FakeAnthropic() as fake:

        def respond(body: dict[str, Any]) -> Any:
            if body["model"] == "claude-bench":  # the turn's request, not a background utility call
                received.append(time.perf_counter())
            return text("ok")

        fake.responder = respond
        config = Config(
            agent=AgentConfig(api_key="bench", base_url=fake.base_url, model="claude-bench"),
            storage=StorageConfig(data_dir=workdir, database=db_path, workspace=workdir / "ws"),
            embedding=EmbeddingConfig(provider="local" if embedder is not None else "none"),
            telegram=TelegramConfig(owner_id=OWNER.id),
            memory=MemoryConfig(distill=False),  # background fact extraction would compete for the CPU
        )
        (workdir / "ws").mkdir()
        (workdir / "ws" / "SOUL.md").write_text("You are Teleton.\n" * 40)
        (workdir / "ws" / "MEMORY.md").write_text("- a remembered line about cabins and gardens\n" * 100)
        gateway = TerminalGateway(Console(file=io.StringIO()), db=db)
        stack = await build_agent(config, db=db, gateway=gateway, embedder=embedder)
        results: dict[str, list[float]] = {}
        stages: dict[str, list[dict[str, float]]] = {}
        row = await db.fetchone("select max(message_id) from tg_messages")
        next_id = max(args.messages, int(row[0] or 0)) + 10
        for kind, chat, sender in (("dm", ChatInfo(id=OWNER.id, type="dm"), OWNER), ("group", GROUP, ALICE)):
            timings = []
            stages[kind] = []
            for turn in range(args.turns + args.warmup):
                next_id += 1
                msg = IncomingMessage(
                    chat=chat,
                    sender=sender,
                    message_id=next_id,
                    date=time.time(),
                    text=QUESTIONS[turn % len(QUESTIONS)],
                    mentions_us=True,
                )
                await db.write(
                    lambda conn, m=msg, u=sender: fa.insert_message(
                        conn,
                        fa.MessageRecord(
                            chat_id=m.chat.id, message_id=m.message_id, date=m.date, text=m.text, sender_id=u.id
                        ),
                    )
                )
                before = len(received)
                t0 = time.perf_counter()
                await stack.agent.handle(msg)
                if turn >= args.warmup:
                    timings.append((received[before] - t0) * 1000)
                    stages[kind].append(stack.agent.last_timings)
            results[kind] = timings
        await stack.close()
    await db.close()

    failed = False
    for kind, timings in results.items():
        timings.sort()
        p50 = statistics.median(timings)
        p95 = timings[int(0.95 * (len(timings) - 1))]
        verdict = "ok" if p95 <= args.floor_ms else "OVER FLOOR"
        failed |= p95 > args.floor_ms
        print(
            f"{kind:5}  turns={len(timings)}  p50={p50:6.1f} ms  p95={p95:6.1f} ms  max={timings[-1]:6.1f} ms  "
            f"(floor p95 <= {args.floor_ms:g} ms: {verdict})"
        )
        means = {name: statistics.mean(t.get(name, 0.0) for t in stages[kind]) for name in ("session", "context")}
        print(
            f"       mean stage ms: session {means['session']:.1f}, context (retrieval + prompt) {means['context']:.1f}"
        )
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--vectors", action="store_true", help="local query embeddings + random archive vectors")
    parser.add_argument("--floor-ms", type=float, default=60.0)
    parser.add_argument("--db", type=Path, help="archive database to build once and reuse")
    sys.exit(asyncio.run(bench(parser.parse_args())))


if __name__ == "__main__":
    main()
