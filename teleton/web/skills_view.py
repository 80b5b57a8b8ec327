"""The Skills page: what the ``skills`` table holds of each skill beside its folder as it lies on disk now, read
only — enabled, waiting for approval, held back by a file changed since approval, archived — with each skill's
pins and the lines of the skills left out.

The page approves nothing: a waiting or held-back skill is approved after the owner reads its whole text
(``teleton skills show NAME``, whose approval code stands for exactly those files). It reads the same store and
workspace as the Facts page (the daemon's own, or the ones `teleton dashboard` opened read-only) and writes
neither: a folder the daemon has not recorded yet is shown as the owner's own, as its next turn records it.
A skill's description is a stranger's words: shown as text (autoescaped), invisible characters named.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from teleton.privacy.payload import reveal
from teleton.skills import store
from teleton.skills.book import ARCHIVE_DIR
from teleton.skills.folder import ROOTS, Skill, SkillError, read_skill, scan
from teleton.skills.install import UPDATES_DIR
from teleton.storage.database import Database
from teleton.web.pages.common import Dashboard, Pages

PIN_SHOWN = 12  # hex digits of a SHA-256 shown, as the review shows them
WAITING = (store.PENDING, store.DRAFTED)
KINDS = {store.PENDING: "installed, not approved yet", store.DRAFTED: "the agent's draft"}


@dataclass(frozen=True)
class Pin:
    path: str
    pinned: str  # the SHA-256 prefix as approved; "" for a file the approval did not have (or the owner's own)
    on_disk: str  # the SHA-256 prefix now; "" for a file gone from the folder

    @property
    def changed(self) -> bool:
        return self.pinned != self.on_disk


@dataclass(frozen=True)
class Shown:
    name: str
    label: str  # owner | public: its root's (public/skills/ is everyone's)
    rel: str  # its folder in the workspace
    source: str  # owner | installed | draft
    state: str
    description: str  # as the owner must see it (``reveal``): nothing invisible
    came_from: str = ""
    uses: int = 0
    last_used: str = "never"
    idle_days: int | None = None
    stale: bool = False
    recorded: bool = True  # False: on disk, not in the table yet (the daemon records it as the owner's own)
    kind: str = ""  # for a waiting one: why it waits
    pins: tuple[Pin, ...] = ()

    @property
    def changed(self) -> list[Pin]:
        return [pin for pin in self.pins if pin.changed]

    @property
    def commands(self) -> tuple[str, str]:
        """What approves it, in a shell: the code is the one ``show`` prints after the whole text."""
        return f"teleton skills show {self.name}", f"teleton skills approve {self.name} --code …"


@dataclass(frozen=True)
class SkillList:
    enabled: list[Shown]
    waiting: list[Shown]
    held: list[Shown]
    archived: list[Shown]
    left_out: list[str]  # scan's lines, then rows whose folder was not read

    @property
    def every(self) -> list[Shown]:
        return sorted([*self.enabled, *self.waiting, *self.held, *self.archived], key=lambda s: (s.name, s.state))


@dataclass(frozen=True)
class SkillsView:
    db: Database
    workspace: Path

    async def listing(self, now: float) -> SkillList:
        """Every skill as the table and the disk hold it at ``now`` (stale: unused ``store.STALE_DAYS``)."""
        found, errors, staged, archived = await asyncio.to_thread(_on_disk, self.workspace)
        rows = await store.rows(self.db)
        enabled, waiting, held = [], [], []
        for skill in found:
            row = rows.get(skill.name)
            if row is None:
                enabled.append(_shown(skill, store.Row(skill.name, store.OWNER_SOURCE, store.ENABLED), now, False))
            elif row.state in WAITING:
                waiting.append(_shown(skill, row, now, kind=KINDS[row.state]))
            elif row.state == store.ENABLED and not row.usable(skill):
                held.append(_shown(skill, row, now))
            elif row.state == store.ENABLED:
                enabled.append(_shown(skill, row, now))
        for skill in staged:
            if (row := rows.get(skill.name)) is not None:
                waiting.append(_shown(skill, row, now, kind="an update, staged beside the approved version"))
        gone = [
            _archived(row, archived.get(name), now) for name, row in sorted(rows.items()) if row.state == store.ARCHIVED
        ]
        on_disk = {s.name for s in found}
        missing = [
            f"{name}: recorded as {row.state} ({row.source}), but no folder of it was read from {'/ or '.join(ROOTS)}/"
            for name, row in sorted(rows.items())
            if row.state != store.ARCHIVED and name not in on_disk
        ]
        return SkillList(enabled, waiting, held, gone, [*errors, *missing])


def skills_of(dash: Dashboard) -> SkillsView | None:
    """The store and workspace the pages read (the Facts page's: the daemon's own, or `teleton dashboard`'s
    read-only store and the config's workspace); None when the dashboard has neither."""
    facts = dash.facts_view
    return SkillsView(facts.db, facts.workspace) if facts is not None else None


def routes(pages: Pages) -> list[Route]:
    async def skills_page(request: Request) -> Response:
        view = skills_of(pages.dash)
        listing = await view.listing(time.time()) if view is not None else None
        return await pages.render(
            request, "skills.html", listing=listing, stale_days=store.STALE_DAYS, archive_days=store.ARCHIVE_DAYS
        )

    return [Route("/skills", skills_page)]


def _on_disk(workspace: Path) -> tuple[list[Skill], list[str], list[Skill], dict[str, Skill]]:
    """(the skills scanned, the lines of those left out, staged updates, archived folders by name)."""
    found, errors = scan(workspace)
    staged: list[Skill] = []
    archived: dict[str, Skill] = {}
    for root in ROOTS:
        for hidden, into in ((UPDATES_DIR, staged), (ARCHIVE_DIR, None)):
            base = workspace / root / hidden
            if not base.is_dir() or base.is_symlink():
                continue
            for folder in sorted(base.iterdir()):
                try:
                    skill = read_skill(folder, root)
                except (SkillError, OSError) as exc:
                    errors.append(f"{root}/{hidden}/{folder.name}: {exc}")
                    continue
                if into is not None:
                    into.append(skill)
                else:
                    archived.setdefault(skill.name, skill)
    return found, errors, staged, archived


def _shown(skill: Skill, row: store.Row, now: float, recorded: bool = True, kind: str = "") -> Shown:
    approved = row.approved_files if row.source != store.OWNER_SOURCE else skill.files
    paths = sorted(set(approved) | set(skill.files))
    pins = tuple(Pin(p, approved.get(p, "")[:PIN_SHOWN], skill.files.get(p, "")[:PIN_SHOWN]) for p in paths)
    return Shown(
        skill.name, _label(skill.root), _folder(skill), row.source, row.state, reveal(skill.description).text,
        row.came_from, row.uses, _when(row.last_used), round(row.idle_days(now)) if recorded else None,
        recorded and store.stale(row, now), recorded, kind, pins,
    )  # fmt: skip


def _archived(row: store.Row, skill: Skill | None, now: float) -> Shown:
    if skill is not None:
        return _shown(skill, row, now)
    pins = tuple(Pin(p, h[:PIN_SHOWN], "") for p, h in sorted(row.approved_files.items()))
    return Shown(row.name, "", "", row.source, row.state, "(its folder was not found in an .archive/ folder)",
                 row.came_from, row.uses, _when(row.last_used), round(row.idle_days(now)), pins=pins)  # fmt: skip


def _folder(skill: Skill) -> str:
    """Where it lies in the workspace: its root's, or a hidden folder of it (a staged update, the archive)."""
    hidden = skill.folder.parent.name
    return f"{skill.root}/{hidden}/{skill.name}" if hidden.startswith(".") else skill.rel


def _label(root: str) -> str:
    return "public" if root == ROOTS[1] else "owner"


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "never"
    return datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M")
