"""Counts as a person reads them: "1 file", "2 files", never "1 files" (text/counts.py, the one rule), and the
status line says the daemon's state once."""

from __future__ import annotations

import os
import time

from teleton.daemon.status_file import DaemonStatus, describe
from teleton.text.counts import counted


def test_a_count_takes_its_nouns_number() -> None:
    assert [counted(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert (counted(1, "entry"), counted(3, "entry"), counted(2, "day")) == ("1 entry", "3 entries", "2 days")
    assert (counted(1, "current fact"), counted(12_400, "current fact")) == ("1 current fact", "12,400 current facts")
    assert counted(2, "person", "people") == "2 people"


def test_the_status_line_says_the_state_once_and_counts_in_the_singular() -> None:
    now = time.time()
    status = DaemonStatus(pid=os.getpid(), started_at=now - 60, updated_at=now, state="running", archived_messages=1)
    running, line = describe(status, now)
    assert running and line.startswith(f"running (pid {os.getpid()}), up ") and "archive 1 message;" in line
    _, stopping = describe(DaemonStatus(pid=os.getpid(), started_at=now, updated_at=now, state="stopping"), now)
    assert stopping.startswith(f"stopping (pid {os.getpid()})") and "archive 0 messages;" in stopping
