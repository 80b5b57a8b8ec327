"""Skills from elsewhere: ``add`` (a folder or a git repository, copied in and pinned), ``update`` (staged
beside the skill until approved), ``approve``, ``remove``, and drafts the agent proposes (docs/skills.md).

Every write records the row first (``store.add``), then the files: a crash in between never leaves a
stranger's folder that reads as the owner's own. Nothing here runs a skill's code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from teleton.skills import store
from teleton.skills.book import ARCHIVE_DIR
from teleton.skills.folder import (
    NAME_RULE,
    ROOTS,
    SKILL_FILE,
    Skill,
    SkillError,
    is_name,
    read_skill,
    split_front_matter,
)
from teleton.skills.review import review, review_update
from teleton.storage.database import Database

UPDATES_DIR = ".updates"  # inside a root: an update waiting for the owner
INCOMING_DIR = ".incoming"  # inside a root: a copy being checked before it becomes a skill
GIT_TIMEOUT_S = 120
DRAFT_BODY_MAX = 20_000  # characters of a body the agent may propose


class InstallError(ValueError):
    """The skill cannot be added or changed; the message is one line saying why."""


@dataclass(frozen=True)
class Staged:
    skill: Skill  # as it now lies in the workspace (pending, or the staged update)
    current: Skill | None = None  # an update: the approved version it would replace


def is_git_url(source: str) -> bool:
    return source.startswith(("https://", "http://", "git@", "ssh://", "file://")) or source.endswith(".git")


async def add(db: Database, workspace: Path, source: str, *, skill: str = "", public: bool = False) -> Staged:
    """Copy the skill at ``source`` (a folder, or a git URL) into the workspace, pending the owner's approval."""
    root = ROOTS[1] if public else ROOTS[0]
    async with _fetched(source) as folder:
        incoming = await asyncio.to_thread(_take_in, folder, skill, workspace, root, is_git_url(source))
    name = incoming.name
    await store.add(db, name, store.INSTALLED, came_from=source)
    target = workspace / root / name
    await asyncio.to_thread(os.replace, incoming, target)
    await asyncio.to_thread(_rmdir_empty, incoming.parent)
    return Staged(await asyncio.to_thread(read_skill, target, root))


def _take_in(folder: Path, skill: str, workspace: Path, root: str, cloned: bool) -> Path:
    """A checked copy of the skill in ``folder``, in the root's ``.incoming/``. Its name must be its folder's,
    except for a repository that is one skill (a clone's folder has no name of its own)."""
    found = _find(folder, skill)
    name = _name_of(found)
    if found.name != name and not (cloned and found == folder):
        raise InstallError(f"{found.name}/{SKILL_FILE}: name {name!r} is not the folder's name {found.name!r}")
    if any((workspace / r / name).exists() for r in ROOTS):
        raise InstallError(f"a skill named {name} is already there (teleton skills update {name})")
    if any((workspace / r / ARCHIVE_DIR / name).exists() for r in ROOTS):
        raise InstallError(f"a skill named {name} is archived (teleton skills restore {name}, or remove it first)")
    return _checked_copy(found, workspace / root / INCOMING_DIR / name, root)


def _checked_copy(source: Path, target: Path, root: str) -> Path:
    try:
        _copy(source, target)
        read_skill(target, root)
    except SkillError as exc:
        _discard(target)
        # Named as the skill's own files ("big/data.bin: …"), not by the staging folder they were checked in.
        raise InstallError(str(exc).replace(f"{root}/{target.parent.name}/", "")) from None
    except OSError:
        _discard(target)
        raise
    return target


def _discard(target: Path) -> None:
    """A refused copy goes, and its staging folder with it once empty: nothing is left half-installed."""
    shutil.rmtree(target, ignore_errors=True)
    _rmdir_empty(target.parent)


def _rmdir_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: another copy is being checked there
        folder.rmdir()


async def update(db: Database, workspace: Path, name: str) -> Staged:
    """Fetch ``name`` again from where it was added; staged in ``.updates/`` until ``approve``."""
    row = (await store.rows(db)).get(name)
    current = await asyncio.to_thread(_on_disk, workspace, name) if is_name(name) else None
    if row is None or row.source != store.INSTALLED or current is None:
        raise InstallError(f"{name} is not an installed skill (only those have a source to update from)")
    async with _fetched(row.came_from) as folder:
        found = await asyncio.to_thread(_find, folder, name)
        staged = await asyncio.to_thread(
            _checked_copy, found, workspace / current.root / UPDATES_DIR / name, current.root
        )
    return Staged(await asyncio.to_thread(read_skill, staged, current.root), current)


def waiting(workspace: Path, name: str) -> Staged | None:
    """What approving ``name`` would enable: a staged update, else the skill as it lies on disk."""
    if not is_name(name):
        return None
    current = _on_disk(workspace, name)
    for root in ROOTS:
        staged = workspace / root / UPDATES_DIR / name
        if staged.is_dir():
            return Staged(read_skill(staged, root), current)
    return Staged(current) if current is not None else None


async def approve(db: Database, workspace: Path, name: str, code: str) -> Skill | None:
    """Enable exactly what ``waiting`` shows if ``code`` is its code; None when it is not (changed since)."""
    staged = await asyncio.to_thread(waiting, workspace, name)
    if staged is None:
        return None
    skill = staged.skill
    if store.approval_code(name, skill.digest) != code.strip().lower():
        return None
    if staged.current is not None and skill.folder != staged.current.folder:  # an update: swap it in
        await asyncio.to_thread(_swap, skill.folder, staged.current.folder)
        skill = await asyncio.to_thread(read_skill, staged.current.folder, staged.current.root)
    return skill if await store.approve(db, skill, code) else None


def _swap(new: Path, old: Path) -> None:
    """The staged update in the skill's place; the old files are set aside first, not deleted, so a crash in
    between leaves them in ``.updates/`` rather than nowhere."""
    aside = new.parent / f"{new.name}.old"
    if aside.exists():
        shutil.rmtree(aside)
    os.replace(old, aside)
    os.replace(new, old)
    shutil.rmtree(aside)


def has_update(workspace: Path, name: str) -> bool:
    return is_name(name) and any((workspace / root / UPDATES_DIR / name).is_dir() for root in ROOTS)


def look(workspace: Path, name: str, row: store.Row | None, *, command: str = "/skills approve") -> str | None:
    """What the owner reads of ``name`` before approving it: a staged update as its diff, else the whole skill
    and why it waits; None when it is not on disk."""
    staged = waiting(workspace, name)
    if staged is None:
        return None
    skill = staged.skill
    if staged.current is not None and skill.folder != staged.current.folder:
        return review_update(staged.current, skill, command=command)
    return review(skill, why=_why(row, skill), command=command)


def _why(row: store.Row | None, skill: Skill) -> str:
    if row is None or row.source == store.OWNER_SOURCE:
        return "your own skill: offered as it is, nothing to approve"
    if row.state == store.PENDING:
        return f"added from {row.came_from}; not used until you approve it"
    if row.state == store.DRAFTED:
        return "a draft the agent proposed; not used until it is approved"
    if row.usable(skill):
        return "enabled, exactly as approved"
    changed = ", ".join(store.changed_files(row, skill))
    return f"changed on disk since you approved it ({changed}); held back until you approve it again"


async def remove(db: Database, workspace: Path, name: str) -> bool:
    """Delete ``name``'s folder (and any staged update or archived copy) and its row; False when there was
    none. An archived copy goes too: restored without its row it would read as the owner's own."""
    if not is_name(name):  # never a path: "" or ".." would name the root itself
        return False
    gone = False
    for root in ROOTS:
        base = workspace / root
        for folder in (base / name, base / UPDATES_DIR / name, base / ARCHIVE_DIR / name):
            if folder.is_dir() and not folder.is_symlink():
                await asyncio.to_thread(shutil.rmtree, folder)
                gone = True
    if name in await store.rows(db):
        await store.forget(db, name)
        gone = True
    return gone


async def propose(
    db: Database, workspace: Path, name: str, description: str, body: str, *, public: bool, steering: Iterable[str]
) -> Skill:
    """The agent's draft, in the folder of its name: offered only once the owner (for a public draft, an admin)
    approves its exact text. Proposing a draft's name again replaces the draft."""
    if not is_name(name):
        raise InstallError(f"name {name!r} must be {NAME_RULE}")
    if len(body) > DRAFT_BODY_MAX:
        raise InstallError(f"the body is over {DRAFT_BODY_MAX:,} characters")
    row = (await store.rows(db)).get(name)
    taken = any((workspace / r / name).exists() for r in ROOTS)
    if (taken or row is not None) and (row is None or row.state != store.DRAFTED):
        raise InstallError(f"a skill named {name} exists already")
    root = ROOTS[1] if public else ROOTS[0]
    await store.add(db, name, store.DRAFT, steering=steering)
    for other in ROOTS:  # an earlier draft of the name, wherever it was kept
        if (workspace / other / name).is_dir():
            await asyncio.to_thread(shutil.rmtree, workspace / other / name)
    folder = workspace / root / name
    one_line = " ".join(description.split())
    text = f"---\nname: {name}\ndescription: {_yaml_text(one_line)}\n---\n{body.strip()}\n"
    await asyncio.to_thread(_write, folder / SKILL_FILE, text)
    try:
        return await asyncio.to_thread(read_skill, folder, root)
    except SkillError as exc:
        await remove(db, workspace, name)
        raise InstallError(str(exc)) from None


def _on_disk(workspace: Path, name: str) -> Skill | None:
    for root in ROOTS:
        if (workspace / root / name / SKILL_FILE).is_file():
            return read_skill(workspace / root / name, root)
    return None


class _fetched:
    """A local folder for ``source``: itself, or a shallow clone of a git URL in a temporary folder."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    async def __aenter__(self) -> Path:
        if not is_git_url(self.source):
            folder = await asyncio.to_thread(lambda: Path(self.source).expanduser())
            if not await asyncio.to_thread(folder.is_dir):
                raise InstallError(f"{self.source}: no such folder")
            return folder
        self._tmp = tempfile.TemporaryDirectory(prefix="teleton-skill-")
        target = Path(self._tmp.name, "repo")
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        proc = await asyncio.create_subprocess_exec(
            "git", "clone", "--depth", "1", "--quiet", "--", self.source, str(target),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        try:
            _, err = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            raise InstallError(f"{self.source}: git clone took over {GIT_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            reason = (err.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
            raise InstallError(f"{self.source}: git clone failed: {reason}")
        return target

    async def __aexit__(self, *exc: object) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


def _find(folder: Path, name: str) -> Path:
    """The skill folder in ``folder``: itself, the one named ``name`` below it, or its only skill."""
    if (folder / SKILL_FILE).is_file() and (not name or _name_of(folder) == name):
        return folder
    found = sorted(p.parent for p in folder.glob("**/SKILL.md") if ".git" not in p.parts and p.is_file())
    if name:
        found = [p for p in found if p.name == name]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InstallError(f"no skill{' named ' + name if name else ''} (a folder with SKILL.md) in it")
    listed = ", ".join(p.name for p in found[:20])
    raise InstallError(f"it holds {len(found)} skills ({listed}): name one with --skill NAME")


def _name_of(folder: Path) -> str:
    where = f"{folder.name}/{SKILL_FILE}"
    try:
        front, _ = split_front_matter((folder / SKILL_FILE).read_text(encoding="utf-8"), where)
    except (SkillError, UnicodeDecodeError, OSError) as exc:
        raise InstallError(str(exc)) from None
    name = front.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        raise InstallError(f"{where}: front matter has no name")
    if not isinstance(name, str) or not is_name(name):
        raise InstallError(f"{where}: name {name!r} must be {NAME_RULE}")
    return name


def _copy(source: Path, target: Path) -> Path:
    """A copy of ``source`` (links kept as links, so a link out is refused by the check after)."""
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    return target


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _yaml_text(text: str) -> str:
    """One line of text as a YAML double-quoted scalar (a colon or a quote in it cannot break the mapping)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
