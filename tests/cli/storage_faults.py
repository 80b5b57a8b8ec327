"""Real storage faults for CLI tests: a read-only filesystem, a full disk, a folder this user may not write.

Root writes through any mode bits, so "read-only" is made real with a read-only bind mount (and "full" with a
tiny tmpfs) in a private mount namespace of the command alone (``unshare``); nothing outside it sees the
mount. "Permission denied" needs a user that mode bits stop: the test's own user when it is not root, else
root without the capabilities that override them. Each helper says why it cannot run here, for a clear skip.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    env.update({"HOME": str(home), "COLUMNS": "200"})
    return env


def teleton(*args: str, home: Path, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess; ``prefix`` wraps it (a mount namespace, dropped capabilities)."""
    command = [*(prefix or []), sys.executable, "-m", "teleton.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env_for(home), timeout=120)


def read_only(*folders: Path) -> list[str]:
    """A command prefix: run in a private mount namespace where ``folders`` are mounted read-only."""
    steps = [f"mount --bind '{d}' '{d}' && mount -o remount,bind,ro '{d}'" for d in folders]
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", " && ".join(steps) + ' && exec "$@"', "sh"]


def full_disk(folder: Path, size_kb: int = 64) -> list[str]:
    """A command prefix: ``folder`` is a tiny tmpfs, full after ``size_kb`` kB, in a private mount namespace."""
    mount = f"mount -t tmpfs -o size={size_kb}k tlt-full '{folder}'"
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount + ' && exec "$@"', "sh"]


@functools.cache
def mount_namespaces() -> str | None:
    """None when this process may make private mounts; else why not (the skip reason)."""
    if shutil.which("unshare") is None:
        return "unshare(1) is not installed"
    probe = tempfile.mkdtemp(prefix="tlt-ro-probe-")
    try:
        proc = subprocess.run(
            [*read_only(Path(probe)), "sh", "-c", f"touch '{probe}/x'"], capture_output=True, text=True, timeout=30
        )
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if "Read-only file system" in proc.stderr:
        return None
    return f"a private read-only mount is not allowed here ({proc.stderr.strip() or proc.returncode})"


def bound_by_modes() -> list[str] | None:
    """A command prefix under which mode bits stop this user: nothing when not root; for root, ``setpriv``
    dropping the capabilities that override them (root then meets the owner's bits, like anyone); None when
    that is not possible here."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        return None
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
