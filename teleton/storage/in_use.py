"""Who is using a data directory: the daemon, `teleton chat` and `teleton backup` each hold a shared lock on
``<data_dir>/in-use.lock`` while they run; `teleton restore` takes it exclusively, so it never swaps the
database under a process that has it open. The kernel drops a lock with its process, so a kill -9 leaves none."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "in-use.lock"


class InUse(RuntimeError):
    pass


def hold(data_dir: Path, *, exclusive: bool = False) -> int:
    """The lock's descriptor (pass it to ``release``); InUse when an exclusive one cannot be had now."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        what = "a daemon, `teleton chat` or a backup" if exclusive else "`teleton restore`"
        raise InUse(f"{what} is using {data_dir}: wait for it or stop it first") from None
    return fd


def release(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
