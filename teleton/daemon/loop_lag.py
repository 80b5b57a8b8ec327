"""Event-loop lag: how late a timer fires. The one number that says "something blocks the loop"."""

from __future__ import annotations

import asyncio
import time
from collections import deque

import numpy as np


class LoopLagMonitor:
    def __init__(self, interval_s: float = 0.1, window: int = 600) -> None:
        self.interval_s = interval_s
        self.samples: deque[float] = deque(maxlen=window)  # seconds late, newest last
        self.worst_s = 0.0

    async def run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            late = max(0.0, time.perf_counter() - started - self.interval_s)
            self.samples.append(late)
            self.worst_s = max(self.worst_s, late)

    def p99_ms(self) -> float:
        if not self.samples:
            return 0.0
        return float(np.percentile(np.fromiter(self.samples, dtype=float), 99)) * 1000
