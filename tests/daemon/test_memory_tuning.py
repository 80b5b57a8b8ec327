"""A months-long daemon gives freed memory back: glibc keeps free pages below the heap's last live block
resident until ``malloc_trim``."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

from teleton.daemon.memory_tuning import trim_heap

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or not ctypes.util.find_library("c"),
    reason="malloc_trim is glibc's",
)


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


@glibc
def test_freed_heap_memory_goes_back_to_the_system() -> None:
    # 64 kB blocks come from the heap (below glibc's mmap threshold); every tenth stays alive, so the 170 MB
    # freed between them cannot go back from the heap's top and stay resident until trimmed.
    blocks = [bytearray(64 * 1024) for _ in range(3_000)]
    for block in blocks:
        block[::4096] = b"x" * len(block[::4096])  # touch every page
    kept = blocks[::10]
    del blocks
    before = _rss_mb()
    assert trim_heap()
    after = _rss_mb()
    assert before - after > 100, f"RSS {before:.0f} -> {after:.0f} MB"
    assert all(block[4096] == ord("x") for block in kept)  # what is alive is untouched
