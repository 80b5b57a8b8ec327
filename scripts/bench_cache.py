"""How much of each prompt the model's cache can serve, through the real daemon (issue 54, point 7).

The daemon runs as a subprocess exactly as the reliability tests start it (tests/daemon/harness.py: the loopback
transport on a Unix socket) against the fake Messages API in this process, whose prompt cache follows
Anthropic's documented rules (tests/fakes/prompt_cache.py: the prefix tools -> system -> messages, at most 4
breakpoints, a 20-block lookback, a 1,024-token minimum, 5-minute entries refreshed on a hit, or 1 hour).
The fake's clock is the benchmark's: turns are 60 s apart without waiting, and ``--pauses`` makes every
fourth gap 7 minutes, past a 5-minute entry's life. The daemon's own clock (the time in its prompt) is real.

Before the daemon starts, its workspace is made (``teleton init``) and its memory seeded through its own
command, ``teleton memory import``: a
MEMORY.md of ~1.5k tokens, notes in memory/*.md, yesterday's and today's daily logs, facts and a summary of an
earlier session. Once it runs, 300 messages of group chatter that does not mention the agent are archived
(two groups), so the feed has something to find. Then two scenarios, one after the other:

- ``dm``: 30 turns of the owner's DM, 17 of them with tool calls (some 2-3 in a row, one turn with two
  calls at once), so a turn has tool-loop follow-up requests;
- ``group``: 15 turns in a group, four senders, each message mentioning the agent, 6 with tool calls (2
  with two in a row).

The model is a responder (a function of the request): it finds its scripted turn by what the user typed (the
latest scripted message in the turn's user message) and its step by the answers already given since. It calls only a
tool the request offers; a planned call whose tool is not offered becomes the text answer (counted).

Printed (JSON on stdout), per scenario, over the main model's requests: requests, turns, the cache hit rate
(tokens read / all input tokens), the share billed at full price, billed token-equivalents (input + 1.25 x
written, 2 x for 1-hour entries, + 0.1 x read), prompt tokens per request and input tokens per turn (all its
requests) as median and p95, the read share of the tool loop's follow-ups (a turn's requests after its
first), the tool list's mean tokens a request and how many turn boundaries changed it, breakpoints a request
(max), where consecutive requests first differ (``prefix_breaks``: the part whose first block changed, at
turn boundaries and within turns) and every part that differs (``changed``: the tool list, each system
block, the first changed message of the history, named by its place), and the best possible layout.

Best possible layout: a lower bound over every ordering of the same content. Each request is its blocks (each
tool, each system block, each message block, by their bytes); a block sent in k requests costs at least
1.0 x its tokens when k = 1 (never reusable) and 1.25 + 0.1 x (k - 1) when k > 1 (written once, read after).
The breakpoint limit, the lookback, the minimum length and expiry are ignored, so no real layout is below
it; ``billed / best`` says how far the daemon is from it.

    python scripts/bench_cache.py --tree /tmp/teleton-base            # the code of another checkout
    python scripts/bench_cache.py --tree /tmp/teleton-base --pauses   # every 4th gap 7 minutes
    python scripts/bench_cache.py --ttl 1h                            # agent.cache_ttl: 1h (new code only)
    python scripts/bench_cache.py --session-tools picked              # tool RAG's picks, grown per session
    python scripts/bench_cache.py --scenario dm --dump /tmp/requests.jsonl   # each request's figures
    python scripts/bench_cache.py --provider openai                   # OpenAI's automatic caching (no markers)
    python scripts/bench_cache.py --skills 20                         # 20 skills listed in the chat block

Nothing leaves the machine: the fake API listens on 127.0.0.1, the chats are a Unix socket, and the daemon
resolves no host name (tests/fakes/dns_witness).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.cache_conversation import (  # noqa: E402
    CLUB,
    DM,
    GROUP,
    MAIN_MODEL,
    OWNER_DM,
    Model,
    Turn,
    chatter,
    memory_export,
)
from tests.daemon.harness import DNS_WITNESS, Daemon, write_config  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic  # noqa: E402
from tests.fakes.prompt_cache import READ_PRICE, WRITE_PRICE, Block, Figures  # noqa: E402

MODEL_CACHE = Path.home() / ".cache" / "teleton-bench"  # XDG_CACHE_HOME of the daemon: the built model is kept
GAP_S = 60.0
PAUSE_S = 420.0

# -- running the daemon --------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def daemon_env(root: Path, tree: Path) -> dict[str, str]:
    """The environment the harness gives the daemon, with ``tree``'s teleton first on the path."""
    return {"PYTHONPATH": os.pathsep.join([str(DNS_WITNESS), str(tree)]), "XDG_CACHE_HOME": str(MODEL_CACHE)}


def run_cli(root: Path, config: Path, tree: Path, *args: str) -> str:
    """``teleton -c CONFIG ARGS`` from ``tree``, in the daemon's environment (its HOME, no API keys)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    env.update(daemon_env(root, tree), HOME=str(root / "home"), DNS_WITNESS_LOG=str(root / "dns.log"))
    done = subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(config), *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"teleton {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip()


def teleton_from(root: Path, tree: Path) -> str:
    """Where the daemon's ``teleton`` package is imported from (the check that ``--tree`` took)."""
    env = {**os.environ, **daemon_env(root, tree)}
    probe = [sys.executable, "-c", "import teleton; print(teleton.__file__)"]
    return subprocess.run(probe, cwd=root, env=env, capture_output=True, text=True, check=True).stdout.strip()


def wait(daemon: Daemon, done: Callable[[], bool], what: str, limit_s: float = 180.0) -> None:
    deadline = time.monotonic() + limit_s
    while not done():
        daemon.pump()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: nothing after {limit_s:.0f} s; stderr: {daemon.stderr()[-2000:]}")
        if daemon.proc is not None and daemon.proc.poll() is not None:
            raise RuntimeError(f"the daemon exited ({daemon.proc.returncode}): {daemon.stderr()[-3000:]}")


def settle(daemon: Daemon, quiet_s: float = 3.0, limit_s: float = 300.0) -> None:
    """Until the daemon has used no CPU for a while (the feed's embeddings done, the index ready)."""
    assert daemon.proc is not None
    proc = psutil.Process(daemon.proc.pid)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        before = sum(proc.cpu_times()[:2])
        time.sleep(quiet_s)
        daemon.pump()
        if sum(proc.cpu_times()[:2]) - before < 0.05 * quiet_s:
            return


def send_chatter(daemon: Daemon, messages: list[tuple[dict[str, Any], dict[str, Any], str]], first_id: int) -> int:
    for n, (chat, sender, said) in enumerate(messages, start=first_id):
        daemon.send(chat, said, message_id=n, sender=sender)
    expected = {(chat["id"], n) for n, (chat, _, _) in enumerate(messages, start=first_id)}
    wait(daemon, lambda: expected <= set(daemon.acked()), "the chatter archived")
    return first_id + len(messages)


@dataclass
class Played:
    """Which requests of the fake's log each turn made."""

    name: str
    chat: dict[str, Any]
    turns: list[range] = field(default_factory=list)
    not_offered: list[str] = field(default_factory=list)  # planned calls whose tool was not offered


def play(daemon: Daemon, api: FakeAnthropic, clock: FakeClock, name: str, chat: dict[str, Any],
         turns: list[Turn], first_id: int, pauses: bool) -> Played:  # fmt: skip
    model = Model(turns)
    api.responder = model
    played = Played(name, chat)
    for n, turn in enumerate(turns):
        gap = PAUSE_S if pauses and n % 4 == 3 else GAP_S
        clock.now += gap
        start, replies = len(api.cache.log), len(daemon.sent(chat["id"]))
        daemon.send(chat, turn.said, message_id=first_id + n, sender=turn.sender,
                    mentions_us=chat["type"] == "group")  # fmt: skip
        wait(daemon, answered(model, daemon, n, chat["id"], replies), f"{name} turn {n}")
        played.turns.append(range(start, len(api.cache.log)))
    played.not_offered = model.not_offered
    return played


def answered(model: Model, daemon: Daemon, turn: int, chat_id: int, replies: int) -> Callable[[], bool]:
    """The turn is over: the model gave its last answer (every request of the turn is in) and the chat got it."""
    return lambda: turn in model.answered and len(daemon.sent(chat_id)) > replies


# -- figures ---------------------------------------------------------------------------------------------------


def quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def best_possible(requests: list[Figures]) -> float:
    """The lower bound of the docstring: per distinct block, 1.0 x once, or 1.25 x once and 0.1 x after."""
    seen: Counter[str] = Counter()
    tokens: dict[str, float] = {}
    for figures in requests:
        for block in figures.blocks:
            seen[block.digest] += 1
            tokens[block.digest] = block.chars / 4
    return sum(tokens[d] * (1.0 if k == 1 else WRITE_PRICE["5m"] + READ_PRICE * (k - 1)) for d, k in seen.items())


def first_difference(before: Figures, after: Figures) -> str:
    """Where ``after`` stops repeating ``before``: the part of the request whose first block changed."""
    for old, new in zip(before.blocks, after.blocks, strict=False):
        if old.digest != new.digest:
            if new.kind == "message":
                return _message_place(_message_of(new), before)
            return "tools" if new.kind == "tool" else new.label
    return "none (extends the previous request)" if len(after.blocks) >= len(before.blocks) else "cut short"


def changes(before: Figures, after: Figures) -> list[str]:
    """Every part that differs, not only the first: the tool list, each system block, the history."""
    parts = ["tools"] if _digests(before, "tool") != _digests(after, "tool") else []
    old, new = _by_label(before, "system"), _by_label(after, "system")
    parts += [label for label in sorted(old.keys() | new.keys()) if old.get(label) != new.get(label)]
    old_messages, new_messages = _messages(before), _messages(after)
    for m, (old_one, new_one) in enumerate(zip(old_messages, new_messages, strict=False)):
        if old_one != new_one:
            parts.append(_message_place(m, before))
            break
    return parts


def _digests(figures: Figures, kind: str) -> list[str]:
    return [b.digest for b in figures.blocks if b.kind == kind]


def _by_label(figures: Figures, kind: str) -> dict[str, str]:
    return {b.label: b.digest for b in figures.blocks if b.kind == kind}


def _message_of(block: Block) -> int:
    return int(block.label.split("]")[0][len("messages[") :])


def _messages(figures: Figures) -> list[list[str]]:
    """Each message's block digests, in order."""
    out: list[list[str]] = []
    for block in figures.blocks:
        if block.kind == "message":
            m = _message_of(block)
            out.extend([] for _ in range(m + 1 - len(out)))
            out[m].append(block.digest)
    return out


def _message_place(m: int, before: Figures) -> str:
    """Message ``m`` named by its place in ``before``: the user message that began its turn, before or after."""
    typed = [_message_of(b) for b in before.blocks if b.kind == "message" and b.label.endswith(" user text")]
    turn_start = typed[-1] if typed else -1
    if m == turn_start:
        return "history: the last turn's user message"
    return "history: older messages" if m < turn_start else "history: the last turn's tool loop or answer"


def scenario_figures(log: list[Figures], played: Played) -> dict[str, Any]:
    turns = [[log[i] for i in r if log[i].model == MAIN_MODEL] for r in played.turns]
    requests = [f for turn in turns for f in turn]
    followups = [f for turn in turns for f in turn[1:]]
    total = sum(f.tokens for f in requests) or 1
    billed = sum(f.billed for f in requests)
    best = best_possible(requests)
    boundaries = [(a[-1], b[0]) for a, b in itertools.pairwise(turns) if a and b]
    within = [(a, b) for turn in turns for a, b in itertools.pairwise(turn)]
    tool_tokens = [sum(b.chars for b in f.blocks if b.kind == "tool") / 4 for f in requests]
    return {
        "requests": len(requests),
        "turns": len(turns),
        "turns_with_tool_calls": sum(1 for turn in turns if len(turn) > 1),
        "cache_hit_rate": round(sum(f.read for f in requests) / total, 3),
        "full_price_share": round(sum(f.input for f in requests) / total, 3),
        "written_share": round(sum(f.written for f in requests) / total, 3),
        "billed_token_equivalents": round(billed),
        "best_possible": round(best),
        "billed_over_best": round(billed / best, 2) if best else None,
        "prompt_tokens_per_request": {"median": statistics.median(f.tokens for f in requests),
                                      "p95": quantile([f.tokens for f in requests], 0.95)},
        "input_tokens_per_turn": {"median": statistics.median(sum(f.tokens for f in t) for t in turns),
                                  "p95": quantile([sum(f.tokens for f in t) for t in turns], 0.95)},
        "follow_up_read_share": round(sum(f.read for f in followups) / (sum(f.tokens for f in followups) or 1), 3),
        "tool_list_tokens_mean": round(statistics.mean(tool_tokens)),
        "tool_list_changed_at_turn_boundaries": f"{sum(not b.tools_same for _, b in boundaries)} of {len(boundaries)}",
        "tool_list_changed_within_turns": sum(1 for _, b in within if not b.tools_same),
        "breakpoints_max": max(f.breakpoints for f in requests),
        "breakpoints": dict(sorted(Counter(f.breakpoints for f in requests).items())),
        "prefix_breaks_at_turn_boundaries": dict(Counter(first_difference(a, b) for a, b in boundaries).most_common()),
        "prefix_breaks_within_turns": dict(Counter(first_difference(a, b) for a, b in within).most_common()),
        "changed_at_turn_boundaries": dict(Counter(c for a, b in boundaries for c in changes(a, b)).most_common()),
        "changed_within_turns": dict(Counter(c for a, b in within for c in changes(a, b)).most_common()),
        "read_ends_at": dict(Counter(_hit_place(f) for f in requests).most_common()),
        "planned_calls_not_offered": sorted(Counter(played.not_offered).items()),
        "utility_requests": sum(1 for r in played.turns for i in r if log[i].model != MAIN_MODEL),
    }  # fmt: skip


def _hit_place(figures: Figures) -> str:
    if figures.hit_at is None:
        return "nothing read"
    label = figures.blocks[figures.hit_at].label
    if label.startswith("messages["):
        return "in the messages"
    return "the tools" if figures.blocks[figures.hit_at].kind == "tool" else label


def dump(path: Path, log: list[Figures], plays: list[Played]) -> None:
    """One JSON line a request: its turn, figures and blocks (label, tokens, digest, breakpoint)."""
    where = {i: (p.name, t) for p in plays for t, r in enumerate(p.turns) for i in r}
    with path.open("w") as out:
        for i, f in enumerate(log):
            name, turn = where.get(i, ("", -1))
            row = {"request": i, "scenario": name, "turn": turn, "model": f.model, "tokens": f.tokens, "read": f.read,
                   "written": f.written, "input": f.input, "billed": round(f.billed, 1), "hit_at": f.hit_at,
                   "blocks": [[b.label, b.chars // 4, b.digest[:10], b.ttl] for b in f.blocks]}  # fmt: skip
            out.write(json.dumps(row) + "\n")


# -- main --------------------------------------------------------------------------------------------------------


def fake_api(provider: str, clock: FakeClock, min_cache_tokens: int) -> FakeAnthropic:
    """The fake Messages API, or the OpenAI-compatible one showing the responder the same request shape."""
    if provider == "anthropic":
        return FakeAnthropic(clock=clock, min_cache_tokens=min_cache_tokens)
    from tests.fakes.openai_view import FakeOpenAIInAnthropicTerms  # only this run needs the OpenAI view

    api = FakeOpenAIInAnthropicTerms()
    api.cache.clock = clock
    return api  # type: ignore[return-value]  # the same script, requests and cache log


def seed(root: Path, config: Path, tree: Path) -> str:
    """The workspace made and the memory imported by the tree's own commands, before the daemon starts."""
    export = root / "memory.json"
    export.write_text(json.dumps(memory_export(datetime.now().astimezone())))
    run_cli(root, config, tree, "init")
    (root / "state" / "workspace" / "MEMORY.md").unlink()  # the template's: ours replaces it, as a user's does
    return run_cli(root, config, tree, "memory", "import", str(export))


def write_skills(workspace: Path, count: int) -> None:
    """``count`` owner skills, each a description of about 25 tokens and a body the prompt never carries."""
    for i in range(count):
        name = f"procedure-{i:02d}"
        folder = workspace / "skills" / name
        folder.mkdir(parents=True)
        description = f"How to handle request kind {i}, the steps, the checks and what to tell the owner at the end."
        body = "\n".join(f"{n}. Step {n} of procedure {i}." for n in range(1, 30))
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


def bench(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    began = time.monotonic()
    clock = FakeClock()
    tree = Path(args.tree).resolve()
    overrides: dict[str, Any] = {"embedding.provider": args.embedding}
    if args.ttl:
        overrides["agent.cache_ttl"] = args.ttl
    if args.session_tools:
        overrides["tool_rag.session_tools"] = args.session_tools
    if args.provider == "openai":
        overrides["agent.provider"] = "openai"
    plays: list[Played] = []
    with fake_api(args.provider, clock, args.min_cache_tokens) as api:
        config = write_config(root, api.base_url, **overrides)
        seeded = seed(root, config, tree)
        write_skills(root / "state" / "workspace", args.skills)
        os.chdir(root)  # ``python -m`` puts the working directory first on the path: not this checkout
        daemon = Daemon(root, config)
        daemon.env.update(daemon_env(root, tree))
        daemon.start()
        try:
            next_id = send_chatter(daemon, chatter(random.Random(7)), 1)
            settle(daemon)
            assert not api.requests, "the chatter made the daemon ask the model"
            scenarios = {"dm": (OWNER_DM, DM), "group": (CLUB, GROUP)}
            for name in ("dm", "group") if args.scenario == "both" else (args.scenario,):
                chat, turns = scenarios[name]
                plays.append(play(daemon, api, clock, name, chat, turns, next_id, args.pauses))
                next_id += len(turns)
        finally:
            daemon.stop()
        log = list(api.cache.log)
    if args.dump:
        dump(Path(args.dump), log, plays)
    return {
        "tree": str(tree), "teleton_from": teleton_from(root, tree), "provider": args.provider,
        "ttl": args.ttl or "default", "session_tools": args.session_tools or "default", "pauses": args.pauses,
        "embedding": args.embedding, "skills": args.skills, "seeded": seeded,
        "host_lookups": daemon.looked_up(), "scenarios": {p.name: scenario_figures(log, p) for p in plays},
        "seconds": round(time.monotonic() - began, 1),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose teleton the daemon runs")
    parser.add_argument("--scenario", choices=("dm", "group", "both"), default="both")
    parser.add_argument("--pauses", action="store_true", help="every 4th gap between turns 7 minutes, not 60 s")
    parser.add_argument("--ttl", choices=("5m", "1h"), help="agent.cache_ttl in the daemon's config (new code)")
    parser.add_argument(
        "--session-tools", choices=("all", "picked"), help="tool_rag.session_tools in the daemon's config (new code)"
    )
    parser.add_argument(
        "--provider",
        choices=("anthropic", "openai"),
        default="anthropic",
        help="openai: the OpenAI-compatible provider against the fake's automatic prefix caching",
    )
    parser.add_argument("--embedding", choices=("local", "none"), default="local", help="embedding.provider")
    parser.add_argument("--min-cache-tokens", type=int, default=1024, help="the model's minimum cacheable length")
    parser.add_argument("--skills", type=int, default=0, help="owner skills in the workspace (issue 59)")
    parser.add_argument("--dump", help="write each request's figures and blocks to this JSONL file")
    parser.add_argument("--keep", action="store_true", help="keep the daemon's files (printed on stderr)")
    args = parser.parse_args()
    here, root = Path.cwd(), Path(tempfile.mkdtemp(prefix="bench-cache-"))
    try:
        report = bench(args, root)
    except BaseException:
        print(f"bench_cache: the daemon's files (config, state, stderr.log) are kept in {root}", file=sys.stderr)
        raise
    finally:
        os.chdir(here)
    if args.keep:
        print(f"bench_cache: files kept in {root}", file=sys.stderr)
    else:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
