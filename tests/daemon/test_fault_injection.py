"""Delivery under faults (docs/operations.md), counted by what the chats RECEIVED: the real daemon, 100 messages
over 10 DMs and 3 groups (each group message mentions the agent by entity), cut 10 times at seeded random
points — with kill -9 (a third of them right after a reply reached the chat, before the daemon knew), and
separately with SIGTERM — restarted each time with every message replayed. After the last restart each
message is answered exactly once; the database passes integrity_check after every cut. More seeds:
``python scripts/fault_runs.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.daemon.faults import MESSAGES, run_with_faults
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = pytest.mark.costly


@pytest.mark.timeout(2400)  # a hang guard: about 2 minutes on a quiet machine, many more when its cores are busy
def test_kill_9_at_ten_random_points_answers_every_message_exactly_once(daemon_root: Path) -> None:
    with FakeAnthropic() as api:
        summary = run_with_faults(daemon_root, api, kills=10, terms=0)
    assert summary.startswith(f"{len(MESSAGES)} of {len(MESSAGES)} ")


@pytest.mark.timeout(2400)
def test_sigterm_at_ten_random_points_answers_every_message_exactly_once(daemon_root: Path) -> None:
    with FakeAnthropic() as api:
        summary = run_with_faults(daemon_root, api, kills=0, terms=10)
    assert summary.startswith(f"{len(MESSAGES)} of {len(MESSAGES)} ")
