"""Keep a months-long process small on glibc (docs/operations.md, "Memory and CPU of a long run").

Two malloc arenas instead of up to 8 per core (a dozen threads each kept their own), and a fixed 1 MiB mmap
threshold so ONNX Runtime's multi-MB activations go back to the system when freed instead of fragmenting the
heap (the figures: docs/benchmarks.md). ``tune_malloc`` must run before the worker threads start;
``settle_after_start`` once start-up is done (it also takes the start's objects out of the collector's way).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc

# From glibc's malloc.h.
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 1 << 20


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    with contextlib.suppress(OSError):
        return ctypes.CDLL(name)
    return None


def tune_malloc(arenas: int = 2, mmap_threshold: int = MMAP_THRESHOLD) -> bool:
    """True when both settings were applied (glibc); False elsewhere (musl, macOS), where they are not needed."""
    libc = _libc()
    if libc is None:
        return False
    with contextlib.suppress(AttributeError):  # no mallopt: not glibc
        # Each applied on its own: one refused does not keep the other from being set.
        arenas_set = bool(libc.mallopt(M_ARENA_MAX, arenas))
        threshold_set = bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold))
        return arenas_set and threshold_set
    return False


def release_free_memory() -> bool:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``): start-up leaves them behind (the
    model's graph as read from its file, the index's load in batches). False where there is no glibc."""
    libc = _libc()
    if libc is None:
        return False
    with contextlib.suppress(AttributeError):  # no malloc_trim: not glibc
        return bool(libc.malloc_trim(0))
    return False


def settle_after_start() -> None:
    """Once start-up is done: its objects (modules, the model, the tool index, caches) live for the whole run, so
    they are moved out of the cyclic collector's reach (``gc.freeze``), and the heap's free pages go back. A full
    collection then walks only what came after, not the start's 220k objects (what that costs a turn: the turn
    row of docs/benchmarks.md)."""
    gc.collect()
    gc.freeze()
    release_free_memory()
