"""Where a tool may touch the workspace: confinement, read-only files and private files (DESIGN §8, §10).

Pure rules over paths, shared by the workspace tools and by the Telegram tools that send or download files,
so "MEMORY.md cannot leave a DM" holds whichever tool the model picks.

Confinement: a path given by the model is relative to the workspace; absolute paths and any ``..`` part are
refused outright, and the real path (symlinks followed) must still lie inside the real workspace, so a
symlink pointing out is refused too. (A symlink swapped in between this check and the I/O is out of scope:
the workspace belongs to the agent and the owner.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from teleton.tools.registry import Access

READ_ONLY = frozenset({"SOUL.md", "STRATEGY.md", "SECURITY.md"})  # at the workspace root
PRIVATE_FILES = frozenset({"MEMORY.md", "USER.md", "STRATEGY.md"})  # at the workspace root
PRIVATE_DIRS = frozenset({"memory"})  # daily logs memory/YYYY-MM-DD.md and topic notes


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
    return len(path.rel.parts) == 1 and path.rel.parts[0] in READ_ONLY


def is_private(path: WorkspacePath) -> bool:
    parts = path.rel.parts
    if not parts:
        return False
    if len(parts) == 1 and parts[0] in PRIVATE_FILES:
        return True
    return parts[0] in PRIVATE_DIRS


def may_see(path: WorkspacePath, access: Access) -> bool:
    """Private files are for chats that may read memory files and daily logs (a DM with the owner)."""
    if not is_private(path):
        return True
    if path.rel.parts[0] in PRIVATE_DIRS:
        return access.daily_logs and access.memory_files
    return access.memory_files


def check_readable(path: WorkspacePath, access: Access) -> None:
    if not may_see(path, access):
        raise PathRefused(f"{path.name} is private and cannot be read in this chat")


def check_writable(path: WorkspacePath, access: Access) -> None:
    if path.rel == PurePosixPath("."):
        raise PathRefused("the workspace root itself cannot be changed")
    if is_read_only(path):
        raise PathRefused(f"{path.name} is read-only to the agent; the owner edits it by hand")
    if not may_see(path, access):
        raise PathRefused(f"{path.name} is private and cannot be changed from this chat")
