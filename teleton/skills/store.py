"""What the owner approved of each skill, and how much it is used (the ``skills`` table, docs/skills.md).

A skill the owner wrote (a folder in ``skills/`` nobody installed) is theirs and is offered as it is. An
installed or drafted skill is offered only while its files hash to what the owner approved: a file changed
on disk, or an update, holds it back until the owner approves the new text (``approve``, bound to the
digest by its code), and the owner is told once per change (``Standing.tell``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from teleton.skills.folder import Skill
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

OWNER_SOURCE, INSTALLED, DRAFT = "owner", "installed", "draft"
ENABLED, PENDING, DRAFTED, ARCHIVED = "enabled", "pending", "draft", "archived"
CODE_LENGTH = 8  # as long as a held item's approval code (tools/held.py)
STALE_DAYS, ARCHIVE_DAYS = 30, 90
DAY_S = 86_400.0
T = TypeVar("T", list[Any], dict[str, Any])
UNREADABLE = ["unreadable steering record"]  # a draft's steering that cannot be read counts as steered


@dataclass(frozen=True)
class Row:
    name: str
    source: str
    state: str
    came_from: str = ""
    steering: tuple[str, ...] = ()
    approved_digest: str | None = None
    approved_files: dict[str, str] = field(default_factory=dict)
    told_digest: str | None = None
    uses: int = 0
    last_used: float | None = None
    created_at: float = 0.0

    def usable(self, skill: Skill) -> bool:
        """Whether ``skill`` (as on disk now) may be offered: the owner's own, or exactly what was approved."""
        if self.state != ENABLED:
            return False
        return self.source == OWNER_SOURCE or skill.digest == self.approved_digest

    def idle_days(self, now: float) -> float:
        return (now - max(self.last_used or 0.0, self.created_at)) / DAY_S


@dataclass(frozen=True)
class Standing:
    rows: dict[str, Row]  # by name, every skill on disk (a row is made for a new owner's skill)
    tell: tuple[str, ...]  # skills newly held back by a change the owner was not told of yet


def approval_code(name: str, digest: str) -> str:
    """What approving a skill takes: it stands for exactly these files, so a notice's code cannot release a
    text changed after the owner saw it."""
    return hashlib.sha256(json.dumps(["skill", name, digest]).encode()).hexdigest()[:CODE_LENGTH]


async def sync(db: Database, skills: Sequence[Skill]) -> Standing:
    """Rows for ``skills`` as they are on disk; an unknown folder is the owner's own."""
    now = time.time()

    def run(conn: Connection) -> Standing:
        rows = {row.name: row for row in _read(conn)}
        tell = []
        for skill in skills:
            row = rows.get(skill.name)
            if row is None:
                conn.execute(
                    "insert into skills(name, source, state, created_at, changed_at) values (?, ?, ?, ?, ?)",
                    (skill.name, OWNER_SOURCE, ENABLED, now, now),
                )
                rows[skill.name] = Row(skill.name, OWNER_SOURCE, ENABLED, created_at=now)
            elif row.source != OWNER_SOURCE and row.state == ENABLED and not row.usable(skill):
                if row.told_digest != skill.digest:
                    conn.execute("update skills set told_digest = ? where name = ?", (skill.digest, skill.name))
                    tell.append(skill.name)
        return Standing(rows, tuple(tell))

    return await db.write(run)


async def add(db: Database, name: str, source: str, *, came_from: str = "", steering: Iterable[str] = ()) -> None:
    """Record a skill before its files are written (installed: pending; drafted: a draft), so a crash between
    the two never leaves a stranger's folder looking like the owner's."""
    now = time.time()
    state = DRAFTED if source == DRAFT else PENDING
    await db.execute(
        "insert into skills(name, source, came_from, steering, state, created_at, changed_at) "
        "values (?, ?, ?, ?, ?, ?, ?) on conflict(name) do update set source = excluded.source, "
        "came_from = excluded.came_from, steering = excluded.steering, state = excluded.state, "
        "approved_digest = null, told_digest = null, changed_at = excluded.changed_at",
        (name, source, came_from, json.dumps(sorted(steering)), state, now, now),
    )


async def approve(db: Database, skill: Skill, code: str) -> bool:
    """Enable ``skill`` as it is on disk now if ``code`` is its code; False when the code stands for another
    text (the files changed after the owner was shown them)."""
    if approval_code(skill.name, skill.digest) != code.strip().lower():
        return False
    now = time.time()
    changed = await db.execute(
        "update skills set state = ?, approved_digest = ?, approved_files = ?, told_digest = ?, changed_at = ? "
        "where name = ? and source != ?",
        (ENABLED, skill.digest, json.dumps(skill.files, sort_keys=True), skill.digest, now, skill.name, OWNER_SOURCE),
    )
    return changed > 0


async def set_state(db: Database, name: str, state: str) -> None:
    await db.execute("update skills set state = ?, changed_at = ? where name = ?", (state, time.time(), name))


async def restored(db: Database, name: str) -> None:
    """An archived skill back in its root: enabled again and counted as used now, so the next curation does not
    archive it again at once."""
    now = time.time()
    await db.execute(
        "update skills set state = ?, last_used = ?, changed_at = ? where name = ? and state = ?",
        (ENABLED, now, now, name, ARCHIVED),
    )


async def used(db: Database, name: str) -> None:
    await db.execute("update skills set uses = uses + 1, last_used = ? where name = ?", (time.time(), name))


async def forget(db: Database, name: str) -> None:
    await db.execute("delete from skills where name = ?", (name,))


async def rows(db: Database) -> dict[str, Row]:
    return {row.name: row for row in await db.read(_read)}


def stale(row: Row, now: float) -> bool:
    return row.state == ENABLED and row.idle_days(now) >= STALE_DAYS


def standing(row: Row | None, skill: Skill | None) -> str:
    """A skill's state as the owner is shown it; ``skill``: as read from its root now (None: not there)."""
    if row is not None and row.state == ARCHIVED:
        return "archived"
    if skill is None:
        return "not on disk"
    if row is None:  # a new folder: the next look makes it the owner's own
        return "enabled"
    if row.state == PENDING:
        return "waiting for approval"
    if row.state == DRAFTED:
        return "draft (waiting for approval)"
    return "enabled" if row.usable(skill) else "held back: changed on disk"


def changed_files(row: Row, skill: Skill) -> list[str]:
    """The files that differ from what the owner approved (added, changed or gone)."""
    approved = row.approved_files
    return sorted(rel for rel in set(approved) | set(skill.files) if approved.get(rel) != skill.files.get(rel))


def due_for_archive(row: Row, now: float) -> bool:
    return row.state == ENABLED and row.idle_days(now) >= ARCHIVE_DAYS


def _read(conn: Connection) -> list[Row]:
    found = conn.execute(
        "select name, source, state, came_from, steering, approved_digest, approved_files, told_digest, uses, "
        "last_used, created_at from skills order by name"
    ).fetchall()
    return [
        Row(r[0], r[1], r[2], r[3], tuple(_loads(r[4], UNREADABLE)), r[5], _loads(r[6], {}), r[7], r[8], r[9], r[10])
        for r in found
    ]


def _loads(text: str | None, otherwise: T) -> T:
    """A stored JSON value; ``otherwise`` when it cannot be read (never "nothing steered": see UNREADABLE)."""
    try:
        value = json.loads(text or "null")
    except ValueError:
        return otherwise
    return value if isinstance(value, type(otherwise)) else otherwise
