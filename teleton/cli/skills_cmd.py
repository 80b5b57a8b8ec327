"""`teleton skills …`: the workspace's skills as the owner manages them from a shell (docs/skills.md).

``add`` copies a skill in (a folder, or a git URL) and shows all of it (``skills.review``); it is used only
once approved: at the prompt, with ``--yes``, or later with the code printed beside it. ``approve`` takes only
the code of exactly the files as they are now. ``update`` stages a new version beside the old and shows what
it changes; the old stays in use until that is approved. Without a running daemon the commands open the
database themselves; a running one sees their changes at its next turn.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Annotated, NoReturn

import typer

from teleton.cli.context import cli_config, opened
from teleton.cli.help_format import App
from teleton.config import Config
from teleton.privacy import Principals, path_label
from teleton.skills import install, store
from teleton.skills.book import ARCHIVE_DIR, restore
from teleton.skills.folder import NAME_RULE, ROOTS, Skill, SkillError, is_name, scan
from teleton.skills.review import review, review_update

app = App(help="Skills: list, show, add, approve, update, remove, restore.", no_args_is_help=True)
NAME_HELP = "The skill's name (its folder's)."


def fail(line: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code)


def checked(name: str) -> str:
    if not is_name(name):
        fail(f"{name!r} is not a skill's name ({NAME_RULE})", 2)
    return name


def no_skill(workspace: Path, name: str) -> NoReturn:
    if any((workspace / root / ARCHIVE_DIR / name).is_dir() for root in ROOTS):
        fail(f"{name} is archived: `teleton skills restore {name}` brings it back", 2)
    fail(f"no skill {name!r} (`teleton skills list` shows them)", 2)


async def rows_of(config: Config) -> dict[str, store.Row]:
    async with opened(config) as db:
        return await store.rows(db)


def look(config: Config, name: str, row: store.Row | None) -> str:
    """The whole review of ``name`` (a staged update as its diff); a skill that cannot be read: one line."""
    workspace = config.storage.workspace_dir
    try:
        shown = install.look(workspace, name, row)
    except SkillError as exc:
        fail(str(exc))
    if shown is None:
        no_skill(workspace, name)
    return shown


@app.command("list")
def list_cmd(ctx: typer.Context) -> None:
    """Every skill: where it came from, its state, whose it is, how much it is used; and what was left out."""
    config = cli_config(ctx)
    workspace = config.storage.workspace_dir
    found, errors = scan(workspace)
    skills = {skill.name: skill for skill in found}
    rows = asyncio.run(rows_of(config))
    if not skills and not rows:
        typer.echo("no skills yet: `teleton skills add PATH|GIT_URL`, or write skills/NAME/SKILL.md")
    now = time.time()
    for name in sorted(set(skills) | set(rows)):
        typer.echo(describe(config, name, rows.get(name), skills.get(name), now))
    if errors:
        typer.echo("left out:")
    for line in errors:
        typer.echo(f"  {line}")


def describe(config: Config, name: str, row: store.Row | None, skill: Skill | None, now: float) -> str:
    workspace = config.storage.workspace_dir
    state = store.standing(row, skill)
    if state == "not on disk" and any((workspace / root / name).is_dir() for root in ROOTS):
        state = "left out (see below)"
    root = skill.root if skill is not None else next(
        (r for r in ROOTS if (workspace / r / ARCHIVE_DIR / name).is_dir() or (workspace / r / name).is_dir()), None
    )  # fmt: skip
    label = path_label(PurePosixPath(f"{root}/{name}"), Principals(), config.privacy.shared_paths) if root else "-"
    uses = "never used"
    if row is not None and row.uses:
        uses = f"used {row.uses} times, last {time.strftime('%Y-%m-%d', time.localtime(row.last_used or 0))}"
    parts = [f"{name}: {row.source if row else store.OWNER_SOURCE}", state, f"label {label}", uses]
    if row is not None and store.stale(row, now):
        parts.append(f"stale (unused {store.STALE_DAYS}+ days)")
    if install.has_update(workspace, name):
        parts.append(f"an update waits (teleton skills show {name})")
    elif state in ("waiting for approval", "draft (waiting for approval)", "held back: changed on disk"):
        parts.append(f"look first: teleton skills show {name}")
    return ", ".join(parts)


@app.command("show")
def show_cmd(ctx: typer.Context, name: Annotated[str, typer.Argument(help=NAME_HELP)]) -> None:
    """Everything in a skill, whole, and the code that approves exactly it; a staged update as what it changes."""
    config = cli_config(ctx)
    checked(name)
    typer.echo(look(config, name, asyncio.run(rows_of(config)).get(name)))


@app.command("add")
def add_cmd(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A folder, or a git URL (https://, git@, file://, …).")],
    skill: Annotated[str, typer.Option("--skill", help="Which skill of a collection (a folder name).")] = "",
    public: Annotated[bool, typer.Option("--public", help="Under public/skills/: usable in every chat.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Enable it as shown, unasked.")] = False,
) -> None:
    """Copy a skill in and show all of it; it is used only once you approve exactly that text."""
    config = cli_config(ctx)
    try:
        staged = asyncio.run(add(config, source, skill, public))
    except (install.InstallError, SkillError) as exc:
        fail(str(exc))
    added = staged.skill
    typer.echo(review(added, why=f"added from {source}; not used until you approve it"))
    code = store.approval_code(added.name, added.digest)
    if not yes and not (sys.stdin.isatty() and typer.confirm("Enable exactly this?", default=False)):
        typer.echo(f"added {added.name} to {added.rel}, not enabled: approve exactly this with "
                   f"`teleton skills approve {added.name} --code {code}`")  # fmt: skip
        return
    approved = asyncio.run(approve(config, added.name, code))
    if approved is None:
        fail(f"{added.rel} changed since it was shown: nothing approved (`teleton skills show {added.name}`)")
    typer.echo(f"enabled {added.name} ({added.rel}), exactly as shown")


async def add(config: Config, source: str, skill: str, public: bool) -> install.Staged:
    async with opened(config) as db:
        return await install.add(db, config.storage.workspace_dir, source, skill=skill, public=public)


async def approve(config: Config, name: str, code: str) -> Skill | None:
    async with opened(config) as db:
        return await install.approve(db, config.storage.workspace_dir, name, code)


@app.command("approve")
def approve_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help=NAME_HELP)],
    code: Annotated[
        str | None, typer.Option(help="The code printed with its review: approves exactly those files, unasked.")
    ] = None,
) -> None:
    """Enable what waits of a skill (added, drafted, changed on disk, or a staged update), exactly as shown."""
    config = cli_config(ctx)
    workspace = config.storage.workspace_dir
    row = asyncio.run(rows_of(config)).get(checked(name))
    shown = look(config, name, row)
    if row is None or row.source == store.OWNER_SOURCE:
        typer.echo(f"{name} is your own skill: it is offered as it is, nothing to approve")
        return
    staged = install.waiting(workspace, name)
    if staged is not None and not install.has_update(workspace, name) and row.usable(staged.skill):
        typer.echo(f"nothing of {name} waits: it is enabled, exactly as approved")
        return
    if code is None:
        typer.echo(shown)
        if not sys.stdin.isatty():
            typer.echo("nothing approved: approve exactly this with the code above (`--code CODE`)")
            raise typer.Exit(1)
        if staged is None or not typer.confirm("Enable exactly this?", default=False):
            typer.echo("nothing approved")
            raise typer.Exit(1)
        code = store.approval_code(name, staged.skill.digest)
    approved = asyncio.run(approve(config, name, code))
    if approved is None:
        fail("that is not the code of what waits now (its files changed since it was shown): nothing approved")
    typer.echo(f"approved {name} ({approved.rel}): enabled exactly as shown")


@app.command("update")
def update_cmd(ctx: typer.Context, name: Annotated[str, typer.Argument(help=NAME_HELP)]) -> None:
    """Fetch an installed skill again from where it came; show what changes. The old stays until approved."""
    config = cli_config(ctx)
    checked(name)
    try:
        staged = asyncio.run(update(config, name))
    except (install.InstallError, SkillError) as exc:
        fail(str(exc))
    new, old = staged.skill, staged.current
    assert old is not None  # an update always has what it replaces
    if new.digest == old.digest:
        shutil.rmtree(new.folder)
        typer.echo(f"{name} is up to date: no file changed where it came from")
        return
    typer.echo(review_update(old, new))
    typer.echo(f"staged: {old.rel} stays in use as it is until you approve the update with its code")


async def update(config: Config, name: str) -> install.Staged:
    async with opened(config) as db:
        return await install.update(db, config.storage.workspace_dir, name)


@app.command("remove")
def remove_cmd(ctx: typer.Context, name: Annotated[str, typer.Argument(help=NAME_HELP)]) -> None:
    """Delete a skill: its folder, any staged update or archived copy, and its record."""
    config = cli_config(ctx)
    checked(name)
    if not asyncio.run(remove(config, name)):
        fail(f"no skill {name!r} (`teleton skills list` shows them)", 2)
    typer.echo(f"removed {name}: its files and its record")


async def remove(config: Config, name: str) -> bool:
    async with opened(config) as db:
        return await install.remove(db, config.storage.workspace_dir, name)


@app.command("restore")
def restore_cmd(ctx: typer.Context, name: Annotated[str, typer.Argument(help=NAME_HELP)]) -> None:
    """Bring an archived skill back; counted as used now, so it is not archived again at once."""
    config = cli_config(ctx)
    workspace = config.storage.workspace_dir
    checked(name)
    try:
        folder = restore(workspace, name)
    except FileNotFoundError as exc:
        fail(str(exc), 2)
    except FileExistsError as exc:
        fail(f"{exc}: remove or rename it first")
    asyncio.run(restored(config, name))
    typer.echo(f"restored {name} to {folder.relative_to(workspace).as_posix()}; archived again after "
               f"{store.ARCHIVE_DAYS} days unused")  # fmt: skip


async def restored(config: Config, name: str) -> None:
    async with opened(config) as db:
        await store.restored(db, name)
