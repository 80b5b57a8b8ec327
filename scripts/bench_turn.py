"""Overhead of one agent turn, excluding the model: from ``agent.handle(msg)`` to the request's last byte
arriving at the Messages API, with a 100k-message archive. Everything is real (SQLite + FTS5 + sqlite-vec, the
runtime, tool RAG, the anthropic SDK over HTTP) except the model, which is the scripted server of the test suite (it
reports usage, prompt-cache reads included, as the real API does).

    python scripts/bench_turn.py                     # keyword-only retrieval
    python scripts/bench_turn.py --vectors           # + the default local model's query embedding, 100k random vectors
    python scripts/bench_turn.py --messages 100000 --turns 300 --floor-ms 60
    python scripts/bench_turn.py --vectors --db /tmp/bench.db   # build the archive once, reuse it after
    python scripts/bench_turn.py --budget 1500 --stable-share 0  # another memory budget (issue 15)
    python scripts/bench_turn.py --provider openai   # the OpenAI-compatible provider, through the openai SDK
    python scripts/bench_turn.py --mcp 3             # 3 idle MCP servers of 20 tools each (tests/fakes/mcp_server.py)

Reports, as JSON on stdout (logs go to stderr): p50 / p95 / max per chat kind (the owner's DM searches every
chat; a group only itself), the mean and p95 tokens of memory per turn (``memory.prompt_budget_tokens``), and a
scripted DM of ``--dm-turns`` turns (50) after ``/new``: its prompt-cache hit rate (cache reads / all input
tokens). Exits 1 when a p95 is over ``--floor-ms``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
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
from teleton.cli.terminal_gateway import TerminalGateway
from teleton.config.schema import (
    AgentConfig,
    Config,
    EmbeddingConfig,
    McpConfig,
    McpServerConfig,
    MemoryConfig,
    StorageConfig,
    TelegramConfig,
)
from teleton.daemon.memory_tuning import settle_after_start
from teleton.daemon.outside_servers import start_mcp
from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.memory.facts.store import Fact
from teleton.memory.feed import archive as fa
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.search.corpora import FEED
from teleton.memory.search.vector_store import write_vectors
from teleton.process.logging import configure_logging
from teleton.storage import Database
from teleton.tools.mcp import pins
from tests.fakes.anthropic_server import FakeAnthropic, text
from tests.fakes.openai_view import FakeOpenAIInAnthropicTerms

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
                fa.upsert_chat(conn, ChatInfo(id=chat_id, type=kind, title=str(chat_id)), now)
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
    from teleton.memory.embeddings.packaged import packaged_model

    return LocalEmbedder(packaged_model())


DM_TOPICS = [
    ("cabin", "the cabin trip in march"),
    ("garden", "the tomatoes in the garden"),
    ("book", "the sailing book Anna recommended"),
    ("dentist", "the dentist appointment"),
    ("chess", "the chess club tournament"),
    ("wifi", "the wifi password at the cabin"),
    ("flight", "my flight to Lisbon"),
    ("gift", "a birthday gift for my sister"),
    ("bike", "the bike repair"),
    ("budget", "the holiday budget"),
]
DM_FORMS = [
    "what do you remember about {}?",
    "any update on {}?",
    "remind me what we said about {}",
    "I was thinking about {} again, thoughts?",
    "let's plan {} properly, what do we know so far?",
]


def scripted_dm(turns: int) -> list[str]:
    """A conversation that wanders over topics the memory knows something about."""
    return [
        DM_FORMS[(n // len(DM_TOPICS)) % len(DM_FORMS)].format(DM_TOPICS[n % len(DM_TOPICS)][1]) for n in range(turns)
    ]


def answer_for(body: dict[str, Any]) -> str:
    """A plausible answer length (a few sentences), so the history grows as a real one does."""
    said = body["messages"][-1]["content"]
    said = said if isinstance(said, str) else said[-1].get("text", "")
    return f"About that ({said[:60]}): here is what I have noted, in two or three sentences of summary. " * 2


async def seed_memory(stack: Any, workspace: Path, db: Database, config: Config, embedder: Any) -> KnowledgeIndex:
    """MEMORY.md, a few notes and facts: more memory than one prompt's budget holds."""
    notes = [f"- {topic}: note {n} about {what}, decided on day {n}" for n in range(12) for topic, what in DM_TOPICS]
    (workspace / "MEMORY.md").write_text("# Notes\n\n" + "\n".join(notes) + "\n")
    (workspace / "memory").mkdir(exist_ok=True)
    for topic, what in DM_TOPICS:
        lines = "".join(f"- {what}: details, part {k}\n" for k in range(20))
        (workspace / "memory" / f"{topic}.md").write_text(f"# {topic}\n\n{lines}")
    facts = stack.agent.deps.facts
    for n, (topic, what) in enumerate(DM_TOPICS):
        await facts.save(Fact(f"{what} matters to the owner", category=topic, importance=0.9 if n < 4 else 0.5))
        await facts.save(Fact(f"{what}: the owner prefers mornings", category=topic, key="when"))
    index = KnowledgeIndex.from_config(db, config, embedder)
    await index.reindex()
    await index.embed_pending()
    return index


def figures(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}
    return {
        "mean": round(statistics.mean(ordered), 1),
        "p50": round(statistics.median(ordered), 1),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 1),
        "max": round(ordered[-1], 1),
    }


async def bench(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    workdir = Path(tempfile.mkdtemp(prefix="teleton-bench-"))
    db_path = args.db or workdir / "bench.db"
    embedder = embedder_or_none(args.vectors)
    embedding = (embedder.model_id, embedder.dims) if embedder is not None else None
    db = await Database.open(db_path, embedding=embedding)
    archived = int((await db.fetchone("select count(*) from tg_messages where message_id <= ?", (args.messages,)))[0])
    report: dict[str, Any] = {
        "provider": args.provider,
        "archive": {"messages": args.messages, "chats": args.chats, "vectors": bool(embedder)},
    }
    if archived < args.messages:
        started = time.perf_counter()
        await fill_archive(db, args.messages, args.chats, embedder is not None, getattr(embedder, "dims", 384))
        report["archive"]["built_s"] = round(time.perf_counter() - started, 1)
        print(f"archive: {args.messages:,} messages built in {report['archive']['built_s']}s", file=sys.stderr)
    else:
        report["archive"]["reused"] = str(db_path)

    received: list[float] = []
    # The OpenAI-compatible fake gets OpenAI's wire format and shows the responder the same request shape.
    with FakeAnthropic() if args.provider == "anthropic" else FakeOpenAIInAnthropicTerms() as fake:

        def respond(body: dict[str, Any]) -> Any:
            if body["model"] == "claude-bench":  # the turn's request, not a background utility call
                received.append(fake.arrivals[-1])  # its last byte read: the fake's own parsing is not the turn's
                return text(answer_for(body))
            return text("ok")

        fake.responder = respond
        memory = MemoryConfig(distill=False)  # background fact extraction would compete for the CPU
        memory.prompt_budget_tokens = args.budget if args.budget is not None else memory.prompt_budget_tokens
        memory.prompt_stable_share = args.stable_share if args.stable_share is not None else memory.prompt_stable_share
        config = Config(
            mcp=McpConfig(servers=idle_mcp_servers(args.mcp)),
            agent=AgentConfig(provider=args.provider, api_key="bench", base_url=fake.base_url, model="claude-bench"),
            storage=StorageConfig(data_dir=workdir, database=db_path, workspace=workdir / "ws"),
            embedding=EmbeddingConfig(provider="local" if embedder is not None else "none"),
            telegram=TelegramConfig(owner_id=OWNER.id),
            memory=memory,
        )
        report["budget"] = {"tokens": memory.prompt_budget_tokens, "stable_share": memory.prompt_stable_share}
        (workdir / "ws").mkdir()
        (workdir / "ws" / "SOUL.md").write_text("You are Teleton.\n" * 40)
        gateway = TerminalGateway(Console(file=io.StringIO()), db=db)
        stack = await build_agent(config, db=db, gateway=gateway, embedder=embedder)
        index = await seed_memory(stack, workdir / "ws", db, config, embedder)
        stack.agent.deps.knowledge = stack.agent.tool_deps.knowledge = index
        servers = start_mcp(config, stack, db, tell_nobody)
        if servers is not None:
            for name in config.mcp.servers:  # connected, and approved as the owner would from the review
                await servers.wait_connected(name)
                waiting = await pins.waiting(db, name)
                await servers.approve(name, pins.approval_code(name, waiting))
            tools = sum(len(state["tools"]) for state in servers.status().values())
            report["mcp"] = {"servers": len(config.mcp.servers), "tools": tools}
        settle_after_start()  # as the daemon does once it is ready (its full collections walk only what came after)
        row = await db.fetchone("select max(message_id) from tg_messages")
        ids = iter(range(max(args.messages, int(row[0] or 0)) + 10, 10**12))

        async def turn(chat: ChatInfo, sender: UserInfo, said: str) -> None:
            msg = IncomingMessage(
                chat=chat, sender=sender, message_id=next(ids), date=time.time(), text=said, mentions_us=True
            )
            await db.write(
                lambda conn: fa.insert_message(
                    conn,
                    fa.MessageRecord(
                        chat_id=chat.id, message_id=msg.message_id, date=msg.date, text=said, sender_id=sender.id
                    ),
                )
            )
            await stack.agent.handle(msg)

        report["latency_ms"], report["memory_tokens"], failed = {}, {}, False
        for kind, chat, sender in (("dm", ChatInfo(id=OWNER.id, type="dm"), OWNER), ("group", GROUP, ALICE)):
            timings, stages, tokens = [], [], []
            for n in range(args.turns + args.warmup):
                before = len(received)
                t0 = time.perf_counter()
                await turn(chat, sender, QUESTIONS[n % len(QUESTIONS)])
                if n >= args.warmup:
                    timings.append((received[before] - t0) * 1000)
                    stages.append(stack.agent.last_timings)
                    tokens.append(stack.agent.last_turns.get(chat.id).memory.total)
            latency = figures(timings)
            failed |= latency["p95"] > args.floor_ms
            report["latency_ms"][kind] = {
                **latency,
                "turns": len(timings),
                "floor_p95": args.floor_ms,
                "ok": latency["p95"] <= args.floor_ms,
                "mean_stage_ms": {
                    name: round(statistics.mean(t.get(name, 0.0) for t in stages), 1) for name in ("session", "context")
                },
            }
            report["memory_tokens"][kind] = figures(tokens)
            print(
                f"{kind}: p95 {latency['p95']} ms, memory mean {report['memory_tokens'][kind]['mean']}", file=sys.stderr
            )
        report["scripted_dm"] = await scripted(stack, turn, args.dm_turns)
        if servers is not None:
            await servers.stop()
        await stack.close()
    await db.close()
    return report, 1 if failed else 0


def idle_mcp_servers(count: int) -> dict[str, McpServerConfig]:
    """``count`` of the test suite's MCP server over stdio, 20 tools each (its 9 and 11 numbered), connected
    and pinged but never called."""
    fake = Path(__file__).resolve().parents[1] / "tests" / "fakes" / "mcp_server.py"
    return {
        f"idle{n}": McpServerConfig(command=sys.executable, args=[str(fake)], read_only=True, env={"MANY_TOOLS": "11"})
        for n in range(1, count + 1)
    }


async def tell_nobody(text: str) -> None:
    """The owner's notices (the server's first tools) have nowhere to go in a benchmark."""


async def scripted(stack: Any, turn: Any, turns: int) -> dict[str, Any]:
    """A fresh DM session of ``turns`` turns: the prompt-cache hit rate over it, and its memory per turn."""
    owner_dm = ChatInfo(id=OWNER.id, type="dm")
    await turn(owner_dm, OWNER, "/new")
    read = total = read_after_first = total_after_first = 0
    tokens = []
    for n, said in enumerate(scripted_dm(turns)):
        await turn(owner_dm, OWNER, said)
        stats = stack.agent.last_turns.get(OWNER.id)
        usage = stats.usage
        read, total = read + usage.cache_read_tokens, total + usage.prompt_tokens
        if n:
            read_after_first += usage.cache_read_tokens
            total_after_first += usage.prompt_tokens
        tokens.append(stats.memory.total)
    return {
        "turns": turns,
        "cache_hit_rate": round(read / total, 3) if total else 0.0,
        "cache_hit_rate_after_first_turn": round(read_after_first / total_after_first, 3) if total_after_first else 0.0,
        "input_tokens": total,
        "cache_read_tokens": read,
        "memory_tokens": figures(tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--vectors", action="store_true", help="local query embeddings + random archive vectors")
    parser.add_argument("--floor-ms", type=float, default=60.0)
    parser.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument("--db", type=Path, help="archive database to build once and reuse")
    parser.add_argument("--dm-turns", type=int, default=50, help="turns of the scripted DM (prompt-cache hit rate)")
    parser.add_argument("--budget", type=int, help="memory.prompt_budget_tokens (default: the config's)")
    parser.add_argument(
        "--mcp", type=int, nargs="?", const=1, default=0, help="idle MCP servers of 20 tools each (their tools offered)"
    )
    parser.add_argument("--stable-share", type=float, help="memory.prompt_stable_share (default: the config's)")
    configure_logging("warning", "console", stream=sys.stderr)  # stdout carries the results only
    report, code = asyncio.run(bench(parser.parse_args()))
    print(json.dumps(report, indent=2))
    sys.exit(code)


if __name__ == "__main__":
    main()
