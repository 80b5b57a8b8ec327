"""How fast the dashboard's pages answer with a 100k-message archive (issue 35: each page under 200 ms).

The real app (Starlette, Jinja2, the guard) served by uvicorn on 127.0.0.1 in this process, over the real
store and agent parts a daemon hands it (the outbox, the memory search, the tool registry with tool RAG):
each page asked ``--requests`` times by a logged-in client, after a warm-up; keyword-only retrieval unless
``--vectors``.

    python scripts/bench_dashboard.py                      # 100k messages, 50 requests per page
    python scripts/bench_dashboard.py --db /tmp/bench.db   # build the archive once, reuse it after

Prints JSON on stdout: p50 / p95 / max per page in milliseconds; exits 1 when a p95 is over --floor-ms.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_turn import OWNER, embedder_or_none, fill_archive
from rich.console import Console

from teleton.agent.factory import build_agent
from teleton.cli.terminal_gateway import TerminalGateway
from teleton.config.schema import (
    AgentConfig,
    Config,
    EmbeddingConfig,
    MemoryConfig,
    StorageConfig,
    TelegramConfig,
    WebConfig,
)
from teleton.daemon.dashboard import start_dashboard
from teleton.daemon.status_file import DaemonStatus
from teleton.process.logging import configure_logging
from teleton.storage import Database

TOKEN = "bench-" + "b" * 40
PAGES = {
    "status": ("/status", {}),
    "memory search": ("/memory", {"q": "what did we decide about the cabin trip in march?"}),
    "memory search as a group": ("/memory", {"q": "the garden project and the tomatoes", "as": "-100000007"}),
    "facts": ("/facts", {}),
    "approvals": ("/approvals", {}),
    "chats": ("/chats", {}),
    "tools with a test message": ("/tools", {"message": "remind me tomorrow at 9 to water the tomatoes"}),
    "logs": ("/logs", {}),
}


def figures(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return {"p50": round(statistics.median(ordered), 1), "p95": round(p95, 1), "max": round(ordered[-1], 1)}


async def bench(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    workdir = Path(tempfile.mkdtemp(prefix="teleton-dash-bench-"))
    db_path = args.db or workdir / "bench.db"
    embedder = embedder_or_none(args.vectors)
    embedding = (embedder.model_id, embedder.dims) if embedder is not None else None
    db = await Database.open(db_path, embedding=embedding)
    have = int((await db.fetchone("select count(*) from tg_messages"))[0])
    if have < args.messages:
        await fill_archive(db, args.messages, 200, embedder is not None, getattr(embedder, "dims", 384))
    log_file = workdir / "daemon.log"
    log_file.write_text("".join(json.dumps({"event": f"e{i}", "level": "info"}) + "\n" for i in range(5000)))
    config = Config(
        agent=AgentConfig(api_key="bench", base_url="http://127.0.0.1:9", model="claude-bench"),
        storage=StorageConfig(data_dir=workdir, database=db_path, workspace=workdir / "ws"),
        embedding=EmbeddingConfig(provider="local" if embedder is not None else "none"),
        telegram=TelegramConfig(owner_id=OWNER.id),
        memory=MemoryConfig(distill=False),
        web=WebConfig(port=0, token=TOKEN),
    )
    config.logging.file = log_file
    (workdir / "ws").mkdir()
    stack = await build_agent(config, db=db, gateway=TerminalGateway(Console(file=io.StringIO()), db=db),
                              embedder=embedder)  # fmt: skip
    status = DaemonStatus(pid=0, started_at=time.time(), state="running")
    server = await start_dashboard(config, lambda: status, stack=stack)
    report: dict[str, Any] = {"archive": {"messages": args.messages, "vectors": embedder is not None}, "pages": {}}
    failed = False
    try:
        # A connection per request: httpx's reused connections wait ~40 ms on delayed ACKs here (curl does not),
        # which would measure the client rather than the dashboard.
        no_reuse = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=60, limits=no_reuse) as http:
            await http.post("/login", data={"token": TOKEN}, headers={"sec-fetch-site": "same-origin"})
            for name, (path, params) in PAGES.items():
                timings = []
                for n in range(args.requests + args.warmup):
                    started = time.perf_counter()
                    answer = await http.get(path, params=params)
                    elapsed = (time.perf_counter() - started) * 1000
                    assert answer.status_code == 200, (name, answer.status_code)
                    if n >= args.warmup:
                        timings.append(elapsed)
                page = figures(timings)
                failed |= page["p95"] > args.floor_ms
                report["pages"][name] = {**page, "ok": page["p95"] <= args.floor_ms}
                print(f"{name}: p50 {page['p50']} ms, p95 {page['p95']} ms", file=sys.stderr)
    finally:
        await server.stop()
        await stack.close()
        await db.close()
    report["floor_p95_ms"] = args.floor_ms
    return report, 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--vectors", action="store_true", help="the default local model's query embeddings")
    parser.add_argument("--floor-ms", type=float, default=200.0)
    parser.add_argument("--db", type=Path, help="archive database to build once and reuse")
    args = parser.parse_args()
    configure_logging("warning", "console", None)
    report, code = asyncio.run(bench(args))
    print(json.dumps(report, indent=2))
    sys.exit(code)


if __name__ == "__main__":
    main()
