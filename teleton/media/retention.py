"""Downloaded media is kept ``media.retention_days`` days, then deleted: a photo of a passport sent once
should not sit on the server for years because the agent read it. What the file said stays in the archive
(and goes with ``/forget``); the file itself goes here. Synchronous: the caller runs it in a thread."""

from __future__ import annotations

import os
import time
from pathlib import Path

DOWNLOADS = "downloads"


def sweep_downloads(workspace: Path, days: int, now: float | None = None) -> int:
    """Delete files under ``workspace/downloads`` last modified more than ``days`` ago; how many were.

    Links are never followed (a link planted in a chat folder must not delete what it points at) and the
    chat folders themselves stay, with their modes."""
    if days <= 0:
        return 0
    cutoff = (time.time() if now is None else now) - days * 86_400
    root = workspace / DOWNLOADS
    removed = 0
    for folder, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(folder, name)
            try:
                info = path.lstat()
                if info.st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
    return removed
