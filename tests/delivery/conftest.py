"""Fixtures of the delivery family."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def daemon_root() -> Iterator[Path]:
    """A data root for the real daemon: short, because its Unix socket path lives under it."""
    root = Path(f"/tmp/tlt-dlv-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    (root / "home").mkdir(parents=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)
