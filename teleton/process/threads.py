"""How many threads the process computes with: one rule for ONNX Runtime, BLAS and the transcriber.

Teleton shares a small machine with itself: the turn, the archive writer, SQLite readers and the embedder.
BLAS (numpy's OpenBLAS) gets one thread: the search's products are small (a few thousand rows of 384), and
OpenBLAS's other threads busy-wait between calls — an all-chat search at 100k cost 55.6 ms of CPU with its
default threads against 8.4 ms with one, for the same latency. ONNX Runtime and the transcriber get every
core the process may run on, for their batches, and ONNX Runtime's threads sleep when idle instead of
spinning (``local.open_session``).
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
