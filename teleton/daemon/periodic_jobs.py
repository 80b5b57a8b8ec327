"""The daemon's periodic jobs on the scheduler: consolidation, the downloads' retention, scheduled backups and
the heartbeat (docs/operations.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from teleton.agent.consolidation import CHECK_EVERY_S, Consolidation
from teleton.agent.heartbeat import Heartbeat
from teleton.agent.runtime import Agent
from teleton.config import Config
from teleton.daemon.backups import ScheduledBackups
from teleton.media.retention import sweep_downloads
from teleton.privacy import Principals
from teleton.scheduler.scheduler import Scheduler
from teleton.storage import Database

log = structlog.get_logger(__name__)
RETENTION_EVERY_S = 6 * 3600


def add_periodic_jobs(
    scheduler: Scheduler,
    agent: Agent,
    db: Database,
    config: Callable[[], Config],  # the running config: SIGHUP replaces it
    principals: Principals,
    tell_owner: Callable[[str], Awaitable[None]],
) -> None:
    now = config()
    memory, media, heartbeat = now.memory, now.media, now.heartbeat
    consolidation = Consolidation(
        agent.scheduled.sweep_sessions,
        db,
        interval_hours=memory.consolidation_interval_hours,
        half_life_days=memory.recency_half_life_days,
    )
    scheduler.add_periodic("consolidation", CHECK_EVERY_S, consolidation.run_if_due, run_at_start=True)
    if media.retention_days > 0:
        workspace, retention = agent.deps.workspace, media.retention_days

        async def sweep() -> None:
            removed = await asyncio.to_thread(sweep_downloads, workspace, retention)
            if removed:
                log.info("downloads_swept", removed=removed, older_than_days=retention)

        scheduler.add_periodic("media_retention", RETENTION_EVERY_S, sweep, run_at_start=True)
    if agent.deps.skills is not None:  # unused skills archived; a changed one held back and told even between turns
        scheduler.add_periodic("skills", CHECK_EVERY_S, agent.deps.skills.curate, run_at_start=True)
    backups = ScheduledBackups(config, tell_owner)
    scheduler.add_periodic("backup", CHECK_EVERY_S, backups.run_if_due, run_at_start=True)
    if heartbeat.enabled and principals.owner_id is not None:
        beat = Heartbeat(agent, principals, agent.deps.workspace)
        scheduler.add_periodic("heartbeat", heartbeat.interval_minutes * 60, beat.beat)
    elif heartbeat.enabled:
        log.warning("heartbeat_disabled", reason="telegram.owner_id is not set: nobody to check in with")
