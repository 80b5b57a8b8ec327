"""Soak test: the real daemon under mixed DM/group traffic for N minutes, loopback only.

Starts a scripted Messages API on 127.0.0.1 and `teleton start` with the loopback chat transport, optionally
pre-fills the archive, then drives traffic and samples the daemon: RSS over time, event-loop lag p99 (from
the daemon's own monitor, via its status file), turns/s, and errors (error lines and tracebacks in its log).

    python scripts/soak.py --minutes 20 --prefill 100000 --rate 4
    python scripts/soak.py --minutes 36 --prefill 100000 --rate 10 --chats 20000   # 20,000 distinct chats
    python scripts/soak.py --minutes 5 --archive ~/.cache/teleton-bench/scale-1000000.db   # bench_scale's 1M

With ``--chats N`` the traffic walks through N distinct chats (new groups and new DM users in turn), so
per-chat state — lanes, locks, rate-limit windows, context buffers, caches — is exercised as a month of
traffic from N chats would. Floors checked at the end: RSS growth < 10% after the first 5 minutes (runs of
10+ minutes), RSS <= 400 MB, zero unhandled exceptions, every accepted message answered or failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from tests.daemon.harness import OWNER, Daemon, write_config  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic, last_user_text, text, tool_use  # noqa: E402

WORDS = ("trip", "ferry", "dinner", "budget", "concert", "garden", "train", "meeting", "birthday", "recipe",
         "Lisbon", "Porto", "Friday", "deadline", "tickets", "hotel", "museum", "bike", "weather", "book")  # fmt: skip


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))


def model(body: dict) -> object:
    """A small stand-in model: sometimes saves a fact through a tool, otherwise answers in text."""
    said = last_user_text(body)
    tools = {t["name"] for t in body.get("tools", [])}
    if "memory_save" in tools and "remember" in said and not any(
        b.get("type") == "tool_result" for m in body["messages"][-1:] for b in m["content"] if isinstance(b, dict)
    ) and isinstance(body["messages"][-1]["content"], str):  # fmt: skip
        return tool_use(("memory_save", {"content": said[-120:], "category": "note"}))
    return text(f"noted: {said[-60:]}")


async def prefill(db_path: Path, total: int) -> None:
    """An archive of ``total`` messages with real-model vectors (bench_search's synthetic corpus), written
    before the daemon starts, so the soak measures a daemon living with a large archive, not a backfill."""
    from bench_search import build

    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.packaged import packaged_model
    from teleton.storage import Database

    embedder = LocalEmbedder(packaged_model())
    db = await Database.open(db_path, embedding=(embedder.model_id, embedder.dims))
    try:
        await build(db, total, embedder, 2000, random.Random(11))
    finally:
        await db.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--prefill", type=int, default=100_000, help="archived messages loaded before the soak")
    parser.add_argument("--rate", type=float, default=4.0, help="incoming messages per second during the soak")
    parser.add_argument("--sample-s", type=float, default=15.0)
    parser.add_argument("--chats", type=int, default=0, help="walk through this many distinct chats (0: 14 fixed ones)")
    parser.add_argument("--archive", type=Path, help="a database to start from (a copy), e.g. bench_scale's")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    console = Console()
    rng = random.Random(7)
    root = Path(tempfile.mkdtemp(prefix="soak-", dir="/tmp"))
    (root / "home").mkdir()

    with FakeAnthropic() as api:
        api.responder = model
        config = write_config(root, api.base_url, **{"telegram.dm_policy": "open", "memory.distill": True})
        if args.archive:
            (root / "state").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(args.archive, root / "state" / "teleton.db")
            args.prefill = int(_count(root / "state" / "teleton.db", "select count(*) from tg_messages"))
        elif args.prefill:
            console.print(f"pre-filling the archive with {args.prefill:,} embedded messages ...")
            started = time.monotonic()
            asyncio.run(prefill(root / "state" / "teleton.db", args.prefill))
            console.print(f"pre-filled in {time.monotonic() - started:.0f}s")
        daemon = Daemon(root, config).start()
        proc = psutil.Process(daemon.proc.pid)  # type: ignore[union-attr]
        console.print(f"ready in {_ready_s(root / 'daemon.log', daemon):.1f}s (a fresh home: the model is built first)")
        stop = threading.Event()
        sent = {"n": 0}
        lock = threading.Lock()

        def send(chat: dict, body: str, sender: dict, **extra: object) -> None:
            with lock:
                sent["n"] += 1
                daemon.send(chat, body, sent["n"], sender=sender, **extra)

        walk = {"n": 0}

        def next_chat() -> tuple[list[dict], list[dict]]:
            """With --chats: the next distinct group and DM user of the walk (it wraps after --chats)."""
            walk["n"] = (walk["n"] + 1) % max(args.chats, 1)
            k = walk["n"]
            return ([{"id": -10_000_000 - k, "type": "group", "title": f"walk group {k}"}],
                    [{"id": 50_000_000 + k, "first_name": f"walker{k}"}])  # fmt: skip

        def traffic() -> None:
            groups = [{"id": -500 - i, "type": "group", "title": f"group {i}"} for i in range(8)]
            users = [{"id": 3000 + i, "first_name": f"user{i}"} for i in range(6)]
            # Shares of owner DMs, other DMs, group mentions (the rest: group chatter nobody asks us about).
            # One owner types at most ~0.5 messages/s: with --chats, more traffic means more chats.
            owner = min(0.35, 0.5 / args.rate) if args.chats else 0.35
            other_dm, mention = owner + (1 - owner) * 0.23, owner + (1 - owner) * 0.46
            next_at = time.monotonic()
            while not stop.is_set():
                if args.chats:
                    groups, users = next_chat()
                roll = rng.random()
                if roll < owner:
                    send({"id": OWNER["id"], "type": "dm", "title": ""}, f"remember {sentence(rng)}", OWNER)
                elif roll < other_dm:
                    user = rng.choice(users)
                    send({"id": user["id"], "type": "dm", "title": ""}, sentence(rng), user)
                elif roll < mention:
                    send(rng.choice(groups), f"@teleton_agent {sentence(rng)}?", rng.choice(users), mentions_us=True)
                else:
                    send(rng.choice(groups), sentence(rng), rng.choice(users))
                next_at += 1 / args.rate  # the rate asked for, whatever a send costs
                time.sleep(max(0.0, next_at - time.monotonic()))

        base_replies = len(daemon.sent())
        driver = threading.Thread(target=traffic, daemon=True)
        started = time.monotonic()
        driver.start()
        samples: list[tuple[float, float, float]] = []  # (minutes, rss MB, lag p99 ms)
        status_path = root / "state" / "status.json"
        try:
            while time.monotonic() - started < args.minutes * 60:
                deadline = time.monotonic() + args.sample_s
                while time.monotonic() < deadline:
                    daemon.pump()
                rss = proc.memory_info().rss / 2**20
                lag = json.loads(status_path.read_text()).get("details", {}).get("loop_lag_p99_ms", 0.0)
                samples.append(((time.monotonic() - started) / 60, rss, lag))
                console.print(f"{samples[-1][0]:5.1f} min  rss {rss:6.1f} MB  loop-lag p99 {lag:6.1f} ms  "
                              f"replies {len(daemon.sent()) - base_replies}")  # fmt: skip
        finally:
            stop.set()
            driver.join(5)
            elapsed = time.monotonic() - started
            daemon.pump()
            replies = len(daemon.sent()) - base_replies
            daemon.signal(signal.SIGTERM)
            code = daemon.proc.wait(60) if daemon.proc else 0
        states = _answer_states(root / "state" / "teleton.db")  # before the restart answers what was open
        restarted = Daemon(root, config).start()
        restart_s = _ready_s(root / "daemon.log", restarted, skip=1)
        restarted.stop()
    log_text = (root / "daemon.log").read_text(errors="replace")
    errors = [line for line in log_text.splitlines() if '"level": "error"' in line or "Traceback" in line]

    chats = f", {args.chats:,} distinct chats" if args.chats else ""
    table = Table(title=f"soak: {args.minutes:g} min, {args.prefill:,} pre-archived, {args.rate:g} msg/s{chats}")
    table.add_column("minute", justify="right")
    table.add_column("RSS MB", justify="right")
    table.add_column("loop lag p99 ms", justify="right")
    for minute, rss, lag in samples:
        table.add_row(f"{minute:.1f}", f"{rss:.1f}", f"{lag:.1f}")
    console.print(table)
    after_warmup = [s for s in samples if s[0] >= 5.0]
    # RSS at one instant includes the work in flight (an ONNX batch, a request body); a leak shows in the
    # median of a minute as well, a transient does not. The first and the last minute after warm-up:
    first = statistics.median(s[1] for s in after_warmup if s[0] < 6.0) if after_warmup else float("nan")
    last = statistics.median(s[1] for s in after_warmup if s[0] >= samples[-1][0] - 1) if after_warmup else first
    growth = (last / first - 1) * 100 if len(after_warmup) >= 2 else float("nan")
    single = (after_warmup[-1][1] / after_warmup[0][1] - 1) * 100 if len(after_warmup) >= 2 else float("nan")
    peak = max(s[1] for s in samples) if samples else float("nan")
    lag_p99 = max(s[2] for s in samples) if samples else float("nan")
    console.print(f"turns/s: {replies / elapsed:.2f} ({replies} replies in {elapsed:.0f}s)")
    if growth == growth:
        console.print(f"RSS growth after minute 5: {growth:.1f}% ({first:.0f} -> {last:.0f} MB, medians of the first "
                      f"and the last minute; single samples {single:+.1f}%)  (floor < 10%)")  # fmt: skip
    else:  # a run of 6 minutes or less has no minute after warm-up to compare
        console.print("RSS growth after minute 5: not measured (run longer than 6 minutes for it)")
    console.print(f"RSS peak: {peak:.1f} MB  (floor <= 400 MB)")
    console.print(f"event-loop lag p99 (worst sample): {lag_p99:.1f} ms")
    console.print(f"errors / tracebacks in the daemon log: {len(errors)}  (floor 0)")
    for line in errors[:5]:
        console.print(f"  {line[:300]}")
    console.print(f"daemon exit code after SIGTERM: {code}")
    console.print(f"restart to ready: {restart_s:.1f}s (the model built, the archive's index loaded)")
    console.print(f"answer states after the stop: {states}  (open ones are answered at the next start)")
    console.print(f"distinct chats: {_distinct_chats(root / 'state' / 'teleton.db'):,}")
    ok = (growth < 10 or growth != growth) and peak <= 400 and not errors and code == 0
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        console.print(f"kept: {root}")
    return 0 if ok else 1


def _answer_states(path: Path) -> dict[str, int]:
    from teleton.storage import connect
    from teleton.storage.sqlite_driver import pick_driver

    conn = connect(path, pick_driver(), vectors=False, readonly=True)
    try:
        rows = conn.execute("select agent_state, count(*) from tg_messages group by agent_state").fetchall()
        return {str(r[0]): int(r[1]) for r in rows}
    finally:
        conn.close()


def _ready_s(log_file: Path, daemon: Daemon, skip: int = 0) -> float:
    """The daemon's start-to-ready seconds, from its log's ready line (after the first ``skip`` of them)."""
    while True:
        daemon.pump()
        lines = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
        ready = [line for line in lines if '"teleton_ready"' in line]
        if len(ready) > skip:
            return float(json.loads(ready[skip])["startup_s"])


def _distinct_chats(path: Path) -> int:
    return _count(path, "select count(distinct chat_id) from tg_messages")


def _count(path: Path, sql: str) -> int:
    from teleton.storage import connect
    from teleton.storage.sqlite_driver import pick_driver

    conn = connect(path, pick_driver(), vectors=False, readonly=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
