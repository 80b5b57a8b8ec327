"""Scheduled backups in the daemon (``backup.every``): due at the configured time, or at the next start when
one was missed; written and verified in a thread, rotated as ``backup.keep`` says. A failure (a full disk, a
folder that cannot be written) is told to the owner once and tried again hourly: the daemon goes on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from teleton.backup import archive, schedule, service
from teleton.config.schema import Config

log = structlog.get_logger(__name__)
RETRY_AFTER_FAILURE_S = 3600.0


@dataclass
class ScheduledBackups:
    config: Callable[[], Config]  # read at each run: a SIGHUP may have changed the schedule
    tell_owner: Callable[[str], Awaitable[None]]
    clock: Callable[[], float] = field(default=time.time)

    async def run_if_due(self) -> service.Made | None:
        config = self.config()
        now = self.clock()
        data_dir = config.storage.data_dir
        record = await asyncio.to_thread(schedule.read_record, data_dir)
        failing = record is not None and record.error is not None
        if failing and record is not None and now - record.at < RETRY_AFTER_FAILURE_S:
            return None
        last = record.last_good_at if record is not None else None  # a success's own time
        if not schedule.is_due(last, now, config.backup):
            return None
        return await self._run(config, now, failing=failing)

    async def _run(self, config: Config, now: float, *, failing: bool) -> service.Made | None:
        try:
            key = service.configured_key(config)
            target = await asyncio.to_thread(service.target_for, config, None, key is not None, now)
            options = archive.Options(vectors=config.backup.vectors, secrets=config.backup.secrets, key=key)
            made = await asyncio.to_thread(service.make, config, target, options, now)
        except Exception as exc:
            reason = service.one_line(exc)
            await asyncio.to_thread(schedule.record_failure, config.storage.data_dir, now, reason)
            log.warning("backup_failed", error=reason)
            if not failing:  # once a streak: the next attempts are hourly, and quiet
                await self.tell_owner(
                    f"Scheduled backup failed: {reason}. I keep running and try again hourly; "
                    "check backup.dir (free space, permissions) or run `teleton backup` by hand."
                )
            return None
        gone = len(await asyncio.to_thread(service.rotate, config))
        log.info("backup_written", path=str(made.path), size=made.size, seconds=round(made.seconds, 1), rotated=gone)
        if failing:
            await self.tell_owner(f"Backups work again: {made.path.name} written and verified.")
        return made
