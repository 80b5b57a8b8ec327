"""The skills a running agent has: which are offered to a turn, what the prompt lists, what reading one shows.

Progressive disclosure: the prompt's stable chat block lists the offered skills' names and descriptions, in
name order (so the cache prefix holds); a body or a file is read on demand (``read``). A skill is offered to
a turn whose clearance reads its folder's label (``privacy.path_label``: ``public/skills/`` for everyone) and
only while it is usable (``store.Row.usable``). A body an installed or drafted skill shows is someone else's
words: the turn sees the origin ``skill:<name>`` (and what steered its draft), so its ways out are weighed
as after a fetched page (docs/skills.md, "Labels and the ways out").
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import structlog

from teleton.privacy import Clearance, Principals, path_label
from teleton.privacy.labels import is_label
from teleton.privacy.payload import strip_invisible
from teleton.privacy.quoting import outside
from teleton.skills import store
from teleton.skills.folder import ROOTS, SKILL_FILE, Skill, scan
from teleton.storage.database import Database
from teleton.text.lines import one_line

log = structlog.get_logger(__name__)

ARCHIVE_DIR = ".archive"  # inside a root: archived skills, moved here, never deleted
READ_CAP = 60_000  # characters of one file a read hands the model


class SkillRefused(ValueError):
    """A skill or file this turn may not read, or that is not there; the message says why."""


@dataclass(frozen=True)
class Shown:
    text: str
    labels: tuple[str, ...]  # the skill's label (what the turn was shown)
    origins: tuple[str, ...]  # outside origins: empty for the owner's own words
    allowed_tools: tuple[str, ...] | None


@dataclass
class SkillBook:
    workspace: Path
    db: Database
    principals: Principals = field(default_factory=Principals)
    shared: tuple[str, ...] = ()  # privacy.shared_paths
    tell: Callable[[str], Awaitable[object]] | None = None  # the owner's notice of a skill held back by a change
    skills: dict[str, Skill] = field(default_factory=dict)
    rows: dict[str, store.Row] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stamp: tuple[object, ...] = ()

    async def refresh(self) -> None:
        """Read the skills again when a file of theirs changed (a stat of each: cheap on every turn), and their
        rows every time (an approval from ``teleton skills`` changes only the database)."""
        stamp = await asyncio.to_thread(self._stamp_now)
        if stamp == self._stamp and self.rows:
            self.rows = await store.rows(self.db)
            if set(self.rows) >= set(self.skills):
                return
        found, errors = await asyncio.to_thread(scan, self.workspace)
        for line in set(errors) - set(self.errors):
            log.warning("skill_left_out", reason=line)
        standing = await store.sync(self.db, found)
        self.skills, self.rows, self.errors, self._stamp = {s.name: s for s in found}, standing.rows, errors, stamp
        for name in standing.tell:
            log.warning("skill_held_back", skill=name, reason="its files changed since the owner approved them")
            if self.tell is not None:
                await self.tell(
                    f"The skill {name} changed on disk since you approved it; it is held back until you look again: "
                    f"/skills show {name}"
                )

    def label(self, skill: Skill) -> str:
        return path_label(PurePosixPath(skill.rel), self.principals, self.shared)

    def offered(self, clearance: Clearance) -> list[Skill]:
        """The skills a turn of ``clearance`` may use, by name."""
        return [
            skill
            for name, skill in sorted(self.skills.items())
            if (row := self.rows.get(name)) is not None and row.usable(skill) and clearance.may_read(self.label(skill))
        ]

    def prompt_block(self, clearance: Clearance) -> str:
        """The chat block's list of skills: the same bytes until a skill is added, changed or removed."""
        lines = [f"- {skill.name}: {given_description(skill.description)}" for skill in self.offered(clearance)]
        if not lines:
            return ""
        head = "## Skills\nProcedures you have. Read one with skill_read before you follow it:"
        return "\n".join([head, *lines])

    def origins(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(labels, outside origins) a turn is shown with ``name``'s words: none beyond its label for the
        owner's own skill and for a draft the owner approved from a turn nothing steered."""
        row = self.rows[name]
        labels = tuple(s for s in row.steering if is_label(s))
        rest = tuple(s for s in row.steering if not is_label(s))
        if row.source == store.INSTALLED or row.steering:
            return labels, (outside("skill", name), *rest)
        return labels, ()

    async def read(self, name: str, clearance: Clearance, file: str = "") -> Shown:
        """``name``'s body (or one of its files) for a turn of ``clearance``, checked against the pins."""
        await self.refresh()
        skill = next((s for s in self.offered(clearance) if s.name == name), None)
        if skill is None:
            raise SkillRefused(f"no skill {name!r} is available here")
        rel = PurePosixPath(file.strip() or SKILL_FILE).as_posix()
        if rel not in skill.files:
            listed = ", ".join(sorted(skill.files))
            raise SkillRefused(f"{name} has no file {rel!r} (its files: {listed})")
        data = await asyncio.to_thread((skill.folder / rel).read_bytes)
        if hashlib.sha256(data).hexdigest() != skill.files[rel]:  # changed since the scan: look again first
            self._stamp = ()
            raise SkillRefused(f"{name} changed while it was read; ask again")
        text = skill.body if rel == SKILL_FILE else data.decode("utf-8", errors="replace")
        await store.used(self.db, name)
        labels, origins = self.origins(name)
        return Shown(text[:READ_CAP], (self.label(skill), *labels), origins, skill.allowed_tools)

    async def curate(self, now: float | None = None) -> list[str]:
        """Archive the skills unused for ``store.ARCHIVE_DAYS``: moved into their root's ``.archive/``."""
        now = time.time() if now is None else now
        await self.refresh()
        archived = []
        for name, row in sorted(self.rows.items()):
            skill = self.skills.get(name)
            if skill is not None and store.due_for_archive(row, now):
                await asyncio.to_thread(_move, skill.folder, skill.folder.parent / ARCHIVE_DIR / name)
                await store.set_state(self.db, name, store.ARCHIVED)
                archived.append(name)
                log.info("skill_archived", skill=name, idle_days=round(row.idle_days(now)))
        if archived:
            self._stamp = ()
            await self.refresh()
        return archived

    def _stamp_now(self) -> tuple[object, ...]:
        stamp: list[object] = []
        for root in ROOTS:
            base = self.workspace / root
            if base.is_dir():
                for path in sorted(base.rglob("*")):
                    if not any(p.startswith(".") for p in path.relative_to(base).parts[:1]):
                        st = path.lstat()
                        stamp.append((path.as_posix(), st.st_mtime_ns, st.st_size))
        return tuple(stamp)


def given_description(text: str) -> str:
    """A description as the model is given it: one line, capped, nothing invisible in it."""
    return one_line(strip_invisible(text)[0], 1024)


def restore(workspace: Path, name: str) -> Path:
    """Move an archived skill back into its root; its path, or FileNotFoundError."""
    for root in ROOTS:
        archived = workspace / root / ARCHIVE_DIR / name
        if archived.is_dir():
            target = workspace / root / name
            if target.exists():
                raise FileExistsError(f"{root}/{name} exists already")
            _move(archived, target)
            return target
    raise FileNotFoundError(f"no archived skill {name!r}")


def _move(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(source), str(target))
