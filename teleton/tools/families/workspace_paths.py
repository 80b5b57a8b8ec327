"""Where a tool may touch the workspace: confinement, read-only files and labels (docs/privacy.md, docs/tools.md).

Shared by the workspace tools and the Telegram tools that send or download files, so "MEMORY.md cannot leave
the owner's DM" holds whichever tool the model picks. A path is relative to the workspace: an absolute path or
a ``..`` part is refused, and the real path (symlinks followed) must lie inside the real workspace. A file's
label is its real path's (``teleton.privacy.path_label``, default-deny). A symlink swapped in between the check
and the I/O is out of scope: the workspace belongs to the agent and the owner.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from teleton.privacy.paths import in_skill_root, is_document, skill_of
from teleton.privacy.quoting import outside
from teleton.tools.registry import ToolContext

READ_ONLY = frozenset({"SOUL.md", "STRATEGY.md", "SECURITY.md"})  # at the workspace root


class PathRefused(ValueError):
    """The path is outside the workspace or not allowed for this operation; the message says why."""


@dataclass(frozen=True)
class WorkspacePath:
    rel: PurePosixPath  # as the model named it, normalised ("." for the root)
    real: Path  # absolute, symlinks resolved, inside the workspace

    @property
    def name(self) -> str:
        return self.rel.as_posix()


def resolve(workspace: Path, given: str) -> WorkspacePath:
    """Map a model-given path to a real path inside ``workspace`` or raise ``PathRefused``."""
    text = given.strip().replace("\\", "/")
    if "\x00" in text:
        raise PathRefused("path contains a NUL byte")
    rel = PurePosixPath(text or ".")
    if rel.is_absolute() or text.startswith("~"):
        raise PathRefused(f"{given!r}: use a path relative to the workspace, not an absolute path")
    if ".." in rel.parts:
        raise PathRefused(f"{given!r}: '..' is not allowed; paths stay inside the workspace")
    root = Path(os.path.realpath(workspace))
    real = Path(os.path.realpath(root.joinpath(*rel.parts)))
    if real != root and not real.is_relative_to(root):
        raise PathRefused(f"{given!r} leads outside the workspace (a symlink?)")
    inner = real.relative_to(root)
    return WorkspacePath(rel=PurePosixPath(inner.as_posix()) if inner.parts else PurePosixPath("."), real=real)


def is_read_only(path: WorkspacePath) -> bool:
    """The persona files, and every skill: a skill the agent wrote itself would read as the owner's own, so
    it drafts one with skill_propose and the owner approves it."""
    return (len(path.rel.parts) == 1 and path.rel.parts[0] in READ_ONLY) or in_skill_root(path.rel)


def may_see(path: WorkspacePath, ctx: ToolContext) -> bool:
    return ctx.clearance.may_read(ctx.deps.label_of_path(path.rel))


def check_readable(path: WorkspacePath, ctx: ToolContext) -> str:
    """Refuse a file this turn may not read; otherwise record it as shown and return its label."""
    label = ctx.deps.label_of_path(path.rel)
    if not ctx.clearance.may_read(label):
        raise PathRefused(f"{path.name} is private and cannot be read in this chat")
    ctx.shown(label)
    if is_document(path.rel) or path.rel.parts[:1] == ("downloads",):  # a file someone sent: their words
        ctx.saw(outside("document", path.rel.as_posix()))
    if (skill := skill_of(path.rel)) is not None:  # read past skill_read, a skill's words are still its own
        ctx.saw(outside("skill", skill))
    return label


def check_writable(path: WorkspacePath, ctx: ToolContext) -> None:
    if path.rel == PurePosixPath("."):
        raise PathRefused("the workspace root itself cannot be changed")
    if is_read_only(path):
        raise PathRefused(
            f"{path.name} is read-only to the agent; the owner edits it by hand"
            + (" (propose a skill with skill_propose)" if in_skill_root(path.rel) else "")
        )
    label = ctx.deps.label_of_path(path.rel)
    if not (ctx.clearance.is_owner or label == ctx.clearance.label):
        raise PathRefused(f"{path.name} cannot be changed from this chat (its files live in {own_folder(ctx)}/)")


def own_folder(ctx: ToolContext) -> str:
    """Where a turn that is not the owner's may keep files: chats/<chat id>/ (labelled as this chat)."""
    return f"chats/{ctx.chat.id}"
