"""The fault-injection run shared by the two fault test modules (DESIGN §11): a 200-message burst over 20
DMs, the real daemon cut (kill -9 or SIGTERM) at seeded random points and restarted each time, then every
message checked: archived once, answered at most once, answered or failed with a reason."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from tests.daemon.harness import Daemon, db_rows, write_config
from tests.fakes.anthropic_server import FakeAnthropic, Reply, overloaded, text, user_said

CHATS, PER_CHAT = 20, 10
USERS = [{"id": 5000 + i, "first_name": f"user{i}"} for i in range(CHATS)]
MESSAGES = [(u, n) for n in range(1, PER_CHAT + 1) for u in USERS]  # interleaved, as a burst arrives
SEED = int(os.environ.get("TELETON_FAULT_SEED", "20261122"))


def _said(user: dict, n: int) -> str:
    return f"question {n} from {user['id']}"


def _open_messages(root: Path) -> int:
    sql = "select count(*) from tg_messages where agent_state in ('archived', 'accepted', 'sending')"
    return db_rows(root, sql)[0][0]


def _settled(root: Path, daemon: Daemon, expected: set[tuple[int, int]]) -> bool:
    """Everything this run sent is acknowledged and no message is still owed an answer (pumps meanwhile)."""
    for _ in range(3):
        daemon.pump()
    return expected <= set(daemon.acked()) and _open_messages(root) == 0


def _config(root: Path, api: FakeAnthropic, outage_s: float) -> Path:
    # Retries outlast the outage (60 of them, up to 0.5 s + 1/20 of the outage apart), as the daemon's own
    # defaults outlast a short one: a message then fails only when a cut lands on its reply.
    return write_config(
        root, api.base_url,
        **{"telegram.dm_policy": "open", "agent.max_retries": 60, "agent.retry_max_delay_s": 0.5 + outage_s / 20,
           "logging.level": "warning"},
    )  # fmt: skip


def run_with_faults(root: Path, api: FakeAnthropic, *, kills: int, terms: int, outage_s: float = 0.0) -> None:
    rng = random.Random(SEED)
    down_until = [0.0]

    def model(body: dict) -> Reply:
        if time.monotonic() < down_until[0]:
            return overloaded()
        return text(f"answer to {user_said(body)}", delay=rng.choice([0.0, 0.01, 0.05, 0.2]))

    api.responder = model
    config = _config(root, api, outage_s)
    # 20 kill -9 and 5 SIGTERM, each after a random number of events: acks (mid-archive) or replies
    # (mid-turn), so the cuts land everywhere from the receive path to the send.
    stops = [signal.SIGKILL] * kills + [signal.SIGTERM] * terms
    rng.shuffle(stops)
    acked: set[tuple[int, int]] = set()
    runs = len(stops) + 1
    chunk = -(-len(MESSAGES) // runs)
    for index, stop in enumerate([*stops, None]):
        daemon = Daemon(root, config).start()
        if outage_s:
            down_until[0] = time.monotonic() + outage_s
        sent_so_far = MESSAGES[: (index + 1) * chunk] if stop is not None else MESSAGES
        # This run's new slice, everything sent before but never acknowledged (Telegram redelivers it),
        # and a few replays of acknowledged ones.
        pending = [(u, n) for u, n in sent_so_far if (u["id"], n) not in acked]
        replays = rng.sample(MESSAGES[: index * chunk], min(5, index * chunk))
        for user, n in [*pending, *replays]:
            daemon.send({"id": user["id"], "type": "dm", "title": ""}, _said(user, n), n, sender=user)
        expected = {(u["id"], n) for u, n in [*pending, *replays]}
        try:
            # No deadline in these loops (_settled pumps the socket): a hang is the test's pytest-timeout.
            if stop is None:
                while not _settled(root, daemon, expected):
                    continue
            else:
                # Cut after a random number of acks (mid-archive) or replies (mid-turn), or once it is all
                # done anyway: the cuts land everywhere from the receive path to the send.
                kind, count = rng.choice(["archived", "send_message"]), rng.randint(1, max(1, len(pending)))
                while sum(e["op"] == kind for e in daemon.events) < count and not _settled(root, daemon, expected):
                    continue
                daemon.signal(stop)
                assert daemon.wait() == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
                daemon.pump()
        finally:
            acked |= set(daemon.acked())
            daemon.stop()
        assert db_rows(root, "pragma integrity_check") == [("ok",)]

    incoming = db_rows(root, "select text, agent_state, agent_note from tg_messages where is_outgoing = 0")
    assert len(incoming) == len(MESSAGES)  # each archived once, replays or not
    replies = Counter(r[0] for r in db_rows(root, "select text from tg_messages where is_outgoing = 1"))
    answered = failed = 0
    for said, state, note in incoming:
        sent = replies[f"answer to {said}"]
        assert sent <= 1, f"{said!r} was answered {sent} times"
        if state == "answered":
            assert sent == 1, f"{said!r} is marked answered but no reply went out"
            answered += 1
        else:
            assert state == "failed" and note, f"{said!r} ended {state!r} without a reason"
            failed += 1
    # Most are answered: a failure is only a reply cut while it went out (never sent twice instead).
    assert answered >= len(MESSAGES) - 25, (answered, failed)
    print(f"\nfaults: {answered} answered, {failed} failed with a reason, seed {SEED}")
