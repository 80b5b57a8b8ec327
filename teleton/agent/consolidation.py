"""Consolidation: a periodic job that turns idle sessions into long-term memory and lets salience decay.

Every ``memory.consolidation_interval_hours`` it ends the sessions that have been idle longer than
``memory.session_idle_minutes`` (each summarised into the daily log and the knowledge base as
``source=session``, with its facts extracted first — the same write-then-compact path as /new), then decays
the importance of facts nobody recalled for a while. The time of the last run is kept in ``meta``, so a
restart neither skips a due run nor runs it again early; the scheduler never runs the job twice at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from teleton.memory.search.salience import decay_salience
from teleton.storage import Database
from teleton.storage.vector_tables import get_meta, set_meta

log = structlog.get_logger(__name__)

LAST_RUN_KEY = "consolidation_last_run"
CHECK_EVERY_S = 600.0  # how often the job wakes to see whether a run is due


@dataclass(frozen=True)
class ConsolidationReport:
    sessions_ended: int
    facts_decayed: int


class Consolidation:
    def __init__(
        self,
        sweep_sessions: Callable[[], Awaitable[int]],  # ``ScheduledTurns.sweep_sessions``: ends idle sessions
        db: Database,
        *,
        interval_hours: float,
        half_life_days: float,
    ) -> None:
        self.sweep_sessions = sweep_sessions
        self.db = db
        self.interval_s = interval_hours * 3600
        self.half_life_days = half_life_days

    async def run_if_due(self, now: float | None = None) -> ConsolidationReport | None:
        now = time.time() if now is None else now
        last = await self._last_run()
        if last is not None and now - last < self.interval_s:
            return None
        return await self.run(now, last)

    async def run(self, now: float, last: float | None) -> ConsolidationReport:
        ended = await self.sweep_sessions()
        elapsed = self.interval_s if last is None else now - last

        def _decay_and_mark(conn: object) -> int:
            changed = decay_salience(conn, now, elapsed, self.half_life_days)
            set_meta(conn, LAST_RUN_KEY, repr(now))
            return changed

        decayed = await self.db.write(_decay_and_mark)
        report = ConsolidationReport(ended, decayed)
        log.info("consolidation_done", sessions_ended=ended, facts_decayed=decayed)
        return report

    async def _last_run(self) -> float | None:
        value = await self.db.read(lambda conn: get_meta(conn, LAST_RUN_KEY))
        return float(value) if value else None
