"""``/skills``: the skills this chat may use, and approving what waits (docs/skills.md).

The owner's own chat sees every skill with its state, ``/skills show NAME`` (the whole review) and may approve
any that waits. Any other chat sees only what its clearance reads (``SkillBook.offered``): an owner's skill is
never named there, not even as refused. In a group, an admin may approve a draft that group proposed (under
``public/skills/``, the group's label among what steered it); nobody else approves anything.
"""

from __future__ import annotations

import asyncio
import time

from teleton.agent.core import AgentCore
from teleton.agent.turn import Turn
from teleton.skills import install, store
from teleton.skills.book import SkillBook, given_description
from teleton.skills.folder import NAME_RULE, ROOTS, SkillError, is_name

USAGE = "Usage: /skills, /skills show NAME, or /skills approve NAME CODE."
REFUSED = "/skills approve is for the owner (in a group, its admins approve the drafts the group proposed)."


async def cmd_skills(agent: AgentCore, turn: Turn, args: str) -> str:
    book = agent.deps.skills
    if book is None:
        return "Skills are not available here."
    words = args.split()
    await book.refresh()
    if not words:
        return await owners_list(book) if turn.clearance.is_owner else chat_list(book, turn)
    if words[0].lower() == "show" and len(words) == 2:
        if not turn.clearance.is_owner:
            return "/skills show works only in the owner's own chat with me."
        return await show(book, words[1])
    if words[0].lower() == "approve" and len(words) in (2, 3):
        return await approve(book, turn, words[1], words[2] if len(words) == 3 else None)
    return USAGE


async def owners_list(book: SkillBook) -> str:
    """Every skill: its source, state, label and use; and the folders left out, and why."""
    now = time.time()
    lines = []
    for name in sorted(set(book.skills) | set(book.rows)):
        row, skill = book.rows.get(name), book.skills.get(name)
        label = book.label(skill) if skill is not None else "-"
        parts = [store.standing(row, skill), f"label {label}"]
        if row is not None:
            parts.append(f"used {row.uses}×" if row.uses else "never used")
            if store.stale(row, now):
                parts.append(f"stale (unused {store.STALE_DAYS}+ days)")
        if await asyncio.to_thread(install.has_update, book.workspace, name):
            parts.append("an update waits")
        source = row.source if row is not None else store.OWNER_SOURCE
        lines.append(f"- {name} ({source}): " + ", ".join(parts))
    if not lines:
        lines.append("No skills yet (skills/NAME/SKILL.md, or `teleton skills add` in a shell).")
    else:
        lines.append("/skills show NAME shows one whole; /skills approve NAME CODE enables exactly what it showed.")
    if book.errors:
        lines += ["Left out:", *(f"- {line}" for line in book.errors)]
    return "\n".join(lines)


def chat_list(book: SkillBook, turn: Turn) -> str:
    """What this chat's clearance reads, and for a group's admin the drafts the group proposed."""
    lines = [f"- {skill.name}: {given_description(skill.description)}" for skill in book.offered(turn.clearance)]
    lines = ["Skills I can use here:", *lines] if lines else ["No skills are available in this chat."]
    drafts = [name for name in sorted(book.skills) if group_draft(book, turn, name)] if turn.is_admin else []
    if drafts:
        lines += ["Drafts proposed here, waiting for an admin (/skills approve NAME CODE, the code in its notice):"]
        lines += [f"- {name}" for name in drafts]
    return "\n".join(lines)


def group_draft(book: SkillBook, turn: Turn, name: str) -> bool:
    """Whether ``name`` is a waiting public draft that this group's turn proposed."""
    row, skill = book.rows.get(name), book.skills.get(name)
    return (
        turn.msg.chat.type != "dm"
        and row is not None
        and skill is not None
        and row.source == store.DRAFT
        and row.state == store.DRAFTED
        and skill.root == ROOTS[1]
        and turn.clearance.label in row.steering
    )


async def show(book: SkillBook, name: str) -> str:
    if not is_name(name):
        return f"{name!r} is not a skill's name ({NAME_RULE})."
    try:
        shown = await asyncio.to_thread(install.look, book.workspace, name, book.rows.get(name))
    except SkillError as exc:
        return str(exc)
    if shown is not None:
        return shown
    row = book.rows.get(name)
    if row is not None and row.state == store.ARCHIVED:
        return f"{name} is archived (unused for {store.ARCHIVE_DAYS} days): `teleton skills restore {name}`."
    return f"No skill named {name}."


async def approve(book: SkillBook, turn: Turn, name: str, code: str | None) -> str:
    if turn.clearance.is_owner:
        row = book.rows.get(name)
        if row is not None and row.source == store.OWNER_SOURCE and name in book.skills:
            return f"{name} is your own skill: it is offered as it is, nothing to approve."
    elif not turn.is_admin or turn.msg.chat.type == "dm":
        return REFUSED
    elif not group_draft(book, turn, name):  # the same words whether or not a skill of that name exists
        return f"No draft named {name} that this group proposed waits for approval."
    if code is None:
        return await show(book, name)
    try:
        approved = await install.approve(book.db, book.workspace, name, code)
    except (install.InstallError, SkillError) as exc:
        return str(exc)
    if approved is None and await asyncio.to_thread(install.waiting, book.workspace, name) is None:
        return await show(book, name)
    if approved is None:
        return "That is not the code of what waits now (it changed, or it is another's): nothing approved."
    await book.refresh()  # the approval changed its row, not a file: offered from now on
    return f"Approved {name} ({approved.rel}): offered from the next message, exactly as shown."
