"""The fault-injection run shared by the two fault test modules (docs/operations.md): a 200-message burst over 20
DMs, the real daemon cut (kill -9 or SIGTERM) at seeded random points and restarted each time, then every
message checked: archived once, answered at most once, answered or failed with a reason."""

from __future__ import annotations

import os
import random
import re
import signal
import time
from collections import Counter
from pathlib import Path

from tests.daemon.harness import Daemon, db_rows, write_config
from tests.fakes.anthropic_server import FakeAnthropic, Reply, overloaded, text, user_said

DMS, GROUPS = 10, 3
DM_USERS = [{"id": 5000 + i, "first_name": f"user{i}"} for i in range(DMS)]
GROUP_CHATS = [{"id": -1009000 - i, "type": "group", "title": f"group {i}"} for i in range(GROUPS)]
# 100 messages: 7 in each DM, 10 in each group (each mentions the agent by entity, not by @name in its text),
# interleaved as a burst arrives.
MESSAGES = [({"id": u["id"], "type": "dm", "title": ""}, u, n) for n in range(1, 8) for u in DM_USERS] + [
    (g, DM_USERS[n % DMS], n) for n in range(1, 11) for g in GROUP_CHATS
]
SEED = int(os.environ.get("TELETON_FAULT_SEED", "20261122"))


def _said(chat: dict, n: int) -> str:
    return f"question {n} in {chat['id']}"


def _open_messages(root: Path) -> int:
    sql = "select count(*) from tg_messages where agent_state in ('archived', 'accepted', 'sending')"
    return db_rows(root, sql)[0][0]


def _settled(root: Path, daemon: Daemon, expected: set[tuple[int, int]]) -> bool:
    """Everything this run sent is acknowledged and no message is still owed an answer (pumps meanwhile)."""
    for _ in range(3):
        daemon.pump()
    if daemon.proc is not None and daemon.proc.poll() is not None and not daemon.env.get("TELETON_LOOPBACK_DIE_AFTER"):
        # Not a cut of ours: the daemon stopped itself (a start that found the database damaged). Said now,
        # instead of waiting into the test's 40-minute hang guard.
        raise AssertionError(f"daemon exited ({daemon.proc.returncode}) on its own: {daemon.stderr()[-2000:]}")
    return expected <= set(daemon.acked()) and _open_messages(root) == 0


def _config(root: Path, api: FakeAnthropic, outage_s: float) -> Path:
    # Retries outlast the outage (60 of them, up to 0.5 s + 1/20 of the outage apart), as the daemon's own
    # defaults outlast a short one.
    return write_config(
        root, api.base_url,
        **{"telegram.dm_policy": "open", "agent.max_retries": 60, "agent.retry_max_delay_s": 0.5 + outage_s / 20,
           "logging.level": "warning"},
    )  # fmt: skip


def run_with_faults(root: Path, api: FakeAnthropic, *, kills: int, terms: int, outage_s: float = 0.0) -> str:
    """Cut the daemon ``kills`` times with SIGKILL and ``terms`` times with SIGTERM, replaying every message
    sent so far after each restart (as Telegram's catch-up would); then check what the chats RECEIVED:
    every message answered exactly once. Returns a one-line summary."""
    rng = random.Random(SEED)
    down_until = [0.0]

    def model(body: dict) -> Reply:
        if time.monotonic() < down_until[0]:
            return overloaded()
        said = re.findall(r"question \d+ in -?\d+", user_said(body))
        return text(f"answer to {said[-1] if said else user_said(body)}", delay=rng.choice([0.0, 0.01, 0.05, 0.2]))

    api.responder = model
    config = _config(root, api, outage_s)
    stops = [signal.SIGKILL] * kills + [signal.SIGTERM] * terms
    rng.shuffle(stops)
    acked: set[tuple[int, int]] = set()
    runs = len(stops) + 1
    chunk = -(-len(MESSAGES) // runs)
    cuts: Counter[str] = Counter()
    for index, stop in enumerate([*stops, None]):
        daemon = Daemon(root, config)
        # A third of the kills land exactly in the window the database cannot see: right after the chat
        # received a reply, before the daemon learned it went out (the loopback's fault knob).
        kinds = ["archived", "send_message"] + (["received"] if stop == signal.SIGKILL else [])
        kind = rng.choice(kinds) if stop is not None else ""
        if kind == "received":
            daemon.env["TELETON_LOOPBACK_DIE_AFTER"] = str(rng.randint(1, max(1, chunk)))
        daemon.start()
        if outage_s:
            down_until[0] = time.monotonic() + outage_s
        sent_so_far = MESSAGES[: (index + 1) * chunk] if stop is not None else MESSAGES
        for chat, user, n in sent_so_far:  # everything so far, again: acknowledged or not
            daemon.send(chat, _said(chat, n), n, sender=user, mentions_us=chat["type"] == "group")
        expected = {(chat["id"], n) for chat, _u, n in sent_so_far}
        try:
            # No deadline in these loops (_settled pumps the socket): a hang is the test's pytest-timeout.
            if stop is None:
                while not _settled(root, daemon, expected):
                    continue
            elif "TELETON_LOOPBACK_DIE_AFTER" in daemon.env:
                while daemon.proc is not None and daemon.proc.poll() is None and not _settled(root, daemon, expected):
                    continue
                if daemon.proc is not None and daemon.proc.poll() is None:  # settled before the knob fired
                    daemon.signal(signal.SIGKILL)
                assert daemon.wait() == -signal.SIGKILL
                cuts["kill -9 after a reply was received"] += 1
            else:
                count = rng.randint(1, max(1, chunk))
                while sum(e["op"] == kind for e in daemon.events) < count and not _settled(root, daemon, expected):
                    continue
                daemon.signal(stop)
                code = daemon.wait()
                assert code == (0 if stop == signal.SIGTERM else -signal.SIGKILL), (code, daemon.stderr()[-3000:])
                cuts[f"{'kill -9' if stop == signal.SIGKILL else 'SIGTERM'} after {kind}"] += 1
            daemon.pump()
        finally:
            acked |= set(daemon.acked())
            daemon.stop()
        assert db_rows(root, "pragma integrity_check") == [("ok",)]

    incoming = db_rows(root, "select chat_id, text, agent_state from tg_messages where is_outgoing = 0")
    assert len(incoming) == len(MESSAGES)  # each archived once, replays or not
    received = Counter(r["text"] for r in daemon.received())
    once = [said for _chat, said, state in incoming if state == "answered" and received[f"answer to {said}"] == 1]
    wrong = {said: (state, received[f"answer to {said}"]) for _c, said, state in incoming if said not in once}
    assert not wrong, f"not answered exactly once (state, times received): {wrong}"
    return f"{len(once)} of {len(MESSAGES)} answered exactly once as received, seed {SEED}, cuts {dict(cuts)}"
