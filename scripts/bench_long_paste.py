"""What a very long message costs, end to end, through the real daemon (issue 30, point 7).

Starts the daemon as the reliability tests do (tests/daemon/harness.py: loopback transport on a Unix socket,
the scripted Messages API on 127.0.0.1). In the owner's DM (whose searches cover every chat) and then in a
group (whose searches rank with the group's own statistics) it sends a pasted log of each size, each followed
by three short follow-ups in the same chat, one message at a time. For every message it prints the seconds
from the send to the reply arriving on the socket and the daemon process's CPU seconds over that time (all its
threads, through psutil); then the CPU the daemon spent after the last reply until it went idle (the
embedding worker). The paste is the daemon test's: one line repeated (``--content log`` for varied lines).
Figures, before and after: docs/benchmarks.md.

    python scripts/bench_long_paste.py                          # 200 kB, 2 MB, 10 MB; the owner's DM, then a group
    python scripts/bench_long_paste.py --embedding local        # the default local model embeds the feed as well
    python scripts/bench_long_paste.py --sizes 2000000 --chats group --keep   # one size, one chat, keep the files
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.daemon.harness import OWNER, Daemon, write_config  # noqa: E402
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, user_said  # noqa: E402

OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
GROUP = {"id": -100_500, "type": "group", "title": "Ops"}  # a group searches its own chat only (scoped)
FOLLOW_UPS = ("what is 2+2", "and what did the log say at the end?", "thanks!")
LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
PATHS = ("/api/items", "/api/users", "/login", "/static/app.js", "/api/orders", "/health")


def paste(size: int, seed: int, content: str = "log") -> str:
    """About ``size`` characters: a server log of varied words, numbers and paths, as a real paste has
    ("log"); one line said over and over ("repeated"); or one line of words with no newline ("line")."""
    if content == "repeated":
        return "BEGIN of the pasted log\n" + "a line of the pasted log\n" * (size // 25) + "END of the pasted log"
    rng = random.Random(seed)
    if content == "line":
        return " ".join(f"{rng.choice(PATHS)}?q={rng.getrandbits(32):x}" for _ in range(size // 20))
    lines = ["BEGIN of the pasted log"]
    total = len(lines[0])
    while total < size:
        line = (
            f"2026-11-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
            f"{rng.randint(0, 59):02d} {rng.choice(LEVELS)} worker-{rng.randint(1, 16)} "
            f"GET {rng.choice(PATHS)}/{rng.randint(1, 99999)} status={rng.choice((200, 200, 304, 404, 500))} "
            f"took {rng.randint(1, 900)}ms user=u{rng.randint(1, 5000)} trace={rng.getrandbits(48):012x}"
        )
        lines.append(line)
        total += len(line) + 1
    lines.append("END of the pasted log")
    return "\n".join(lines)


def model(body: Body) -> Reply:
    said = user_said(body)
    return text("4" if said == "what is 2+2" else f"read {len(said)} characters")


def cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def idle_cpu(daemon: Daemon, proc: psutil.Process, quiet_s: float = 2.0) -> float:
    """CPU seconds the daemon spends from now until it stays idle for ``quiet_s``."""
    began = last = cpu(proc)
    while True:
        deadline = time.monotonic() + quiet_s
        while time.monotonic() < deadline:
            daemon.pump()
        now = cpu(proc)
        if now - last < 0.05 * quiet_s:
            return now - began
        last = now


def run_chat(daemon: Daemon, api: FakeAnthropic, proc: psutil.Process, chat: dict, args: argparse.Namespace,
             first_id: int) -> list[dict[str, object]]:  # fmt: skip
    """Each size's paste and its follow-ups in ``chat``, one message at a time; a row per message."""
    rows: list[dict[str, object]] = []
    message_id = first_id
    name = chat["type"]
    for size in args.sizes:
        for kind, body in [("paste", paste(size, size, args.content)), *(("follow-up", q) for q in FOLLOW_UPS)]:
            message_id += 1
            answered = len(daemon.sent(chat["id"])) + 1
            before, started = cpu(proc), time.monotonic()
            daemon.send(chat, body, message_id=message_id, mentions_us=chat is GROUP)
            daemon.wait_for(lambda ev, n=answered: len(daemon.sent(chat["id"])) >= n)
            rows.append({"chat": name, "size": size, "message": kind, "chars": len(body),
                         "seconds": round(time.monotonic() - started, 3), "cpu_s": round(cpu(proc) - before, 3),
                         "request_chars": len(json.dumps(api.requests[-1]))})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
        rows.append({"chat": name, "size": size, "message": "after the replies, until idle",
                     "cpu_s": round(idle_cpu(daemon, proc), 3)})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000, 10_000_000])
    parser.add_argument("--chats", nargs="+", default=["dm", "group"], choices=("dm", "group"),
                        help="the owner's DM (searches every chat) and a group (searches itself)")  # fmt: skip
    parser.add_argument("--embedding", default="none", choices=("none", "local"), help="embedding.provider")
    parser.add_argument("--content", default="repeated", choices=("repeated", "log", "line"), help="what is pasted")
    parser.add_argument("--keep", action="store_true", help="keep the daemon's directory")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="long-paste-", dir="/tmp"))
    (root / "home").mkdir()
    rows: list[dict[str, object]] = []
    with FakeAnthropic() as api:
        api.responder = model
        config = write_config(root, api.base_url, **{"embedding.provider": args.embedding})
        daemon = Daemon(root, config).start()
        proc = psutil.Process(daemon.proc.pid)  # type: ignore[union-attr]
        idle_cpu(daemon, proc)
        print(json.dumps({"ready": True, "pid": proc.pid}), flush=True)
        try:
            for n, name in enumerate(args.chats):
                rows += run_chat(daemon, api, proc, GROUP if name == "group" else OWNER_DM, args, n * 1000)
        finally:
            daemon.stop()
    expected = len(args.chats) * len(args.sizes) * (1 + len(FOLLOW_UPS))
    replies = len(daemon.sent())
    print_table(rows)
    print(f"replies: {replies} of {expected}" + (f"; the daemon's directory: {root}" if args.keep else ""))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if replies == expected else 1


def print_table(rows: list[dict[str, object]]) -> None:
    """Per chat and size: the paste, each follow-up, and the CPU after the last reply (seconds / CPU s)."""
    print("| chat | size | paste s (CPU s) | follow-ups s (CPU s) | CPU s after, until idle |")
    print("|---|---|---|---|---|")
    keys = list(dict.fromkeys((r["chat"], r["size"]) for r in rows))
    for chat, size in keys:
        mine = [r for r in rows if (r["chat"], r["size"]) == (chat, size)]
        cell = [f"{r['seconds']:.2f} ({r['cpu_s']:.2f})" for r in mine if "seconds" in r]
        after = [r["cpu_s"] for r in mine if "seconds" not in r]
        print(f"| {chat} | {int(size):,} | {cell[0]} | {', '.join(cell[1:])} | {after[0] if after else ''} |")


if __name__ == "__main__":
    sys.exit(main())
