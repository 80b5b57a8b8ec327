"""Delivery under faults (DESIGN §11): the real daemon, killed (-9) and stopped (SIGTERM) at seeded random
points of a 200-message burst over 20 DMs, restarted each time. After the last restart every accepted
message is answered exactly once or recorded failed with a reason; the database passes integrity_check
after every kill; nothing is answered twice, not even when Telegram replays the updates."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.daemon.faults import run_with_faults
from tests.fakes.anthropic_server import FakeAnthropic


@pytest.mark.timeout(2400)  # a hang guard: 2.5 min on a quiet machine, 15+ when its cores are busy elsewhere
def test_kill_9_and_sigterm_at_random_points_answer_each_message_once(daemon_root: Path) -> None:
    with FakeAnthropic() as api:
        run_with_faults(daemon_root, api, kills=20, terms=5)
