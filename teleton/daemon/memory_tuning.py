"""Keep a months-long process small on glibc.

glibc gives each thread that allocates its own malloc arena (up to 8 per core) and rarely returns freed
memory from them; with a dozen threads (SQLite readers, ONNX Runtime, the executor) that alone measured
~70 MB of extra resident memory at start and growing fragmentation under load. Two arenas are plenty for
one event loop plus worker threads. Must run before the worker threads start.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util

M_ARENA_MAX = -8  # from glibc's malloc.h


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """True when the limit was applied (glibc); False elsewhere (musl, macOS), where it is not needed."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_ARENA_MAX, arenas))
    return False
