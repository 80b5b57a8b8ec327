"""When a scheduled backup is due, which archives rotation keeps, and the record of the last backup that
`teleton status` and the dashboard show. Plain functions of a time, so a test drives them on a fake clock."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from teleton.config.schema import BackupConfig
from teleton.storage.private_files import write_private

RECORD = "last-backup.json"
_STAMP = re.compile(r"teleton-(\d{8}-\d{6})\.tar\.gz(\.enc)?$")


def latest_slot(now: float, every: str, at: str) -> float | None:
    """The most recent time at or before ``now`` a backup was scheduled for (local time); None when off."""
    if every == "off":
        return None
    moment = dt.datetime.fromtimestamp(now)
    if every == "hourly":
        return moment.replace(minute=0, second=0, microsecond=0).timestamp()
    hour, minute = (int(part) for part in at.split(":"))
    slot = moment.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if slot > moment:
        slot -= dt.timedelta(days=1)
    if every == "weekly":  # Sundays
        slot -= dt.timedelta(days=(slot.weekday() + 1) % 7)
    return slot.timestamp()


def is_due(last: float | None, now: float, config: BackupConfig) -> bool:
    """Due when no backup was made since the latest slot: a slot missed while the daemon was down runs at start."""
    slot = latest_slot(now, config.every, config.at)
    return slot is not None and (last is None or last < slot)


def archive_time(path: Path) -> float | None:
    found = _STAMP.search(path.name)
    if found is None:
        return None
    return dt.datetime.strptime(found.group(1), "%Y%m%d-%H%M%S").timestamp()


def to_remove(archives: Iterable[Path], daily: int, weekly: int) -> list[Path]:
    """The archives rotation drops: kept are the newest of each of the last ``daily`` days that have one and
    the newest of each of the ``weekly`` weeks before those (ISO weeks)."""
    timed = sorted(((t, p) for p in archives if (t := archive_time(p)) is not None), reverse=True)
    keep: set[Path] = set()
    days: set[dt.date] = set()
    weeks: set[tuple[int, int]] = set()
    for when, path in timed:
        day = dt.date.fromtimestamp(when)
        if day in days:
            continue
        if len(days) < daily:
            days.add(day)
            keep.add(path)
            continue
        week = day.isocalendar()[:2]
        if week not in weeks and len(weeks) < weekly and week not in {d.isocalendar()[:2] for d in days}:
            weeks.add(week)
            keep.add(path)
    return [path for _, path in timed if path not in keep]


@dataclass
class BackupRecord:
    """The last backup made, by the daemon or the CLI: where, when, how big, and whether it verified."""

    at: float
    path: str
    size: int
    verified: bool
    error: str | None = None  # the last attempt failed: why (at is then the failure's time)
    last_good_at: float | None = None

    def line(self) -> str:
        when = dt.datetime.fromtimestamp(self.at).strftime("%Y-%m-%d %H:%M")
        if self.error is not None:
            good = (
                "never"
                if self.last_good_at is None
                else dt.datetime.fromtimestamp(self.last_good_at).strftime("%Y-%m-%d %H:%M")
            )
            return f"FAILED at {when}: {self.error} (last good backup: {good})"
        checked = "verified" if self.verified else "not verified"
        return f"{when}, {self.size / 2**20:.1f} MB, {checked} ({self.path})"


def read_record(data_dir: Path) -> BackupRecord | None:
    with contextlib.suppress(OSError, ValueError, TypeError):
        return BackupRecord(**json.loads((data_dir / RECORD).read_text(encoding="utf-8")))
    return None


def write_record(data_dir: Path, record: BackupRecord) -> None:
    write_private(data_dir / RECORD, json.dumps(asdict(record)))


def record_failure(data_dir: Path, at: float, error: str) -> BackupRecord:
    before = read_record(data_dir)  # a success records itself as its last good backup: it carries over
    record = BackupRecord(at, before.path if before else "", 0, False, error, before.last_good_at if before else None)
    write_record(data_dir, record)
    return record
