"""The log file rotates by size, keeps ``backup_count`` older files, and every file of it stays 0600 (even
under a umask that would create them wider); with no backups the full file is emptied."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from teleton.process.logging import MB, configure_logging

LINE = "x" * 200


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that would create every file world-readable: the mode must come from the code, not from it."""
    old = os.umask(0)
    yield
    os.umask(old)
    configure_logging(level="warning", fmt="json")  # closes the file handler


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_file_rotates_keeps_its_count_and_every_file_is_private(tmp_path: Path, open_umask: None) -> None:
    log_file = tmp_path / "logs" / "daemon.log"
    max_bytes = 4096
    configure_logging("info", "json", log_file, max_file_mb=max_bytes / MB, backup_count=2)
    log = structlog.get_logger("t")
    for n in range(200):  # about 250 bytes a line: far more than three files hold
        log.info("line", n=n, text=LINE)

    files = sorted(tmp_path.joinpath("logs").iterdir())
    assert [f.name for f in files] == ["daemon.log", "daemon.log.1", "daemon.log.2"]  # the oldest were dropped
    assert {f.name: _mode(f) for f in files} == dict.fromkeys(["daemon.log", "daemon.log.1", "daemon.log.2"], 0o600)
    assert _mode(log_file.parent) == 0o700
    for rotated in files[1:]:  # full when rotated; past the size by at most the line that filled it
        assert max_bytes <= rotated.stat().st_size < max_bytes + 400
    # Oldest to newest, the files hold the last lines in order, none lost between them.
    kept = [json.loads(line)["n"] for f in reversed(files) for line in f.read_text().splitlines()]
    assert kept == list(range(kept[0], 200))


def test_with_no_backups_the_full_file_is_emptied(tmp_path: Path, open_umask: None) -> None:
    log_file = tmp_path / "chat.log"
    max_bytes = 2048
    configure_logging("info", "human", log_file, max_file_mb=max_bytes / MB, backup_count=0)
    log = structlog.get_logger("t")
    sizes = []
    for n in range(100):
        log.info("line", n=n, text=LINE)
        sizes.append(log_file.stat().st_size)

    assert [f.name for f in tmp_path.iterdir()] == ["chat.log"]
    assert max(sizes) < max_bytes + 400 and sizes.count(min(sizes)) > 1  # emptied more than once
    assert _mode(log_file) == 0o600
    assert json.loads(log_file.read_text().splitlines()[-1])["n"] == 99


def test_a_file_rotated_by_another_process_is_followed(tmp_path: Path, open_umask: None) -> None:
    """``teleton chat`` may write the daemon's ``logging.file``: one rotates, the other writes the new file."""
    log_file = tmp_path / "daemon.log"
    configure_logging("info", "json", log_file, max_file_mb=1, backup_count=3)
    log = structlog.get_logger("t")
    log.info("before")
    log_file.rename(tmp_path / "daemon.log.1")  # what the other process's rotation does
    log.info("after")
    assert [json.loads(line)["event"] for line in log_file.read_text().splitlines()] == ["after"]
    assert _mode(log_file) == 0o600
