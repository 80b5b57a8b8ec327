"""How many threads the process computes with: one rule for ONNX Runtime, BLAS and the transcriber.

Teleton shares a small machine with itself: the turn, the archive writer, SQLite readers and the embedder.
BLAS (numpy's OpenBLAS) gets one thread in every ``teleton`` command (the CLI's callback): OpenBLAS's other
threads busy-wait after each call, taking a core a small server's other work needs (docs/dependencies.md). The
search makes no BLAS call at all (``memory/search/bit_index.py``), for callers that never set the limit.
ONNX Runtime and the transcriber get every core the process may run on, for their batches, and ONNX Runtime's
threads sleep when idle instead of spinning (``local.open_session``).
"""

from __future__ import annotations

import os

import numpy  # noqa: F401  # loaded before the limit: threadpoolctl limits the libraries it finds loaded
from threadpoolctl import threadpool_limits


def cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's or systemd's CPU limit)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def limit_blas_threads() -> None:
    """One BLAS thread for the rest of the process (numpy's OpenBLAS, or whichever BLAS it was built with)."""
    threadpool_limits(limits=1, user_api="blas")
