"""Large blocks go back to the system when freed: ONNX Runtime's activations (several MB a batch) do not stay
in the heap for good between small blocks allocated beside them. Run in a fresh interpreter each, since the
settings last for the process."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")

# 40 blocks of 2 MB, each followed by a smaller one (256 kB) that stays (as a request's objects stay while a batch
# runs), after one block of 8 MB freed first: untuned, that free raises glibc's threshold above 2 MB.
# Both scripts: glibc's malloc and free, and the process's anonymous resident memory.
_LIBC = """
import ctypes, sys
from teleton.daemon.memory_tuning import release_free_memory, tune_malloc

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def anon_kb():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("RssAnon"))

def touched(size):
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    return block
"""
_SCRIPT = (
    _LIBC
    + """
if sys.argv[1] == "tuned" and not tune_malloc():
    sys.exit("not glibc")
libc.free(touched(8 << 20))
before = anon_kb()
large, small = [], []
for _ in range(40):
    large.append(touched(2 << 20))
    small.append(touched(256 << 10))
for block in large:
    libc.free(block)
print((anon_kb() - before) // 1024 - 10)  # less the 10 MB of smaller blocks still held
"""
)


def _kept_mb(mode: str) -> int:
    run = subprocess.run([sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True, check=True)
    return int(run.stdout)


def test_freed_large_blocks_leave_the_process_once_tuned() -> None:
    assert _kept_mb("tuned") < 8  # 80 MB allocated and freed


def test_without_the_tuning_the_same_blocks_stay_resident() -> None:
    # What the tuning is for: glibc's own behaviour keeps them (the first test would pass without it otherwise).
    assert _kept_mb("default") > 60


# 1,000 blocks of 64 kB (under the 1 MiB threshold: from the heap), each followed by a small one that stays, so
# the freed ones are holes the heap cannot shrink past.
_HOLES = (
    _LIBC
    + """
tune_malloc()
before = anon_kb()
holes, kept = [], []
for _ in range(1_000):
    holes.append(touched(64 << 10))
    kept.append(touched(1 << 10))
for block in holes:
    libc.free(block)
if sys.argv[1] == "release" and not release_free_memory():
    sys.exit("not glibc")
print((anon_kb() - before) // 1024)
"""
)


def _holes_mb(mode: str) -> int:
    run = subprocess.run([sys.executable, "-c", _HOLES, mode], capture_output=True, text=True, check=True)
    return int(run.stdout)


def test_the_heaps_free_pages_go_back_when_released() -> None:
    # What the daemon does once it is ready: start-up's freed blocks (the model's graph as read, the index's load
    # in batches) otherwise stay resident for the whole run.
    assert _holes_mb("keep") > 50  # 64 MB freed, still resident
    assert _holes_mb("release") < 10
