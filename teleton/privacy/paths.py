"""The label of a workspace file, from its real path (symlinks already resolved by the caller).

Default-deny: a file is the owner's unless a rule below names it, so a file nobody thought of (a new
folder, a note the agent wrote, ``learnings/``, ``HEARTBEAT.md``) never leaves the owner's clearance.

| path | label |
|---|---|
| ``public/**``, the persona files SOUL.md, IDENTITY.md, SECURITY.md, ``privacy.shared_paths`` | public |
| ``downloads/<chat id>/**``, ``chats/<chat id>/**`` | that chat's label |
| everything else | owner |
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import PurePosixPath

from teleton.privacy.labels import OWNER, PUBLIC, Principals

PUBLIC_DIR = "public"
# Where ``memory_add_document`` keeps a document's text: someone else's words, outside content wherever shown.
DOCUMENT_PLACES = ("memory/doc-", "public/documents/")
PERSONA_FILES = frozenset({"SOUL.md", "IDENTITY.md", "SECURITY.md"})
CHAT_DIRS = frozenset({"downloads", "chats"})  # <dir>/<chat id>/…: files of that chat
# Where skills live (docs/skills.md): the owner's, and everyone's under public/. Not knowledge, read-only to the
# agent, and a skill's words read through any tool carry the origin ``skill:<name>``.
SKILL_ROOTS = ("skills", "public/skills")


def path_label(rel: PurePosixPath | str, principals: Principals, shared: Sequence[str] = ()) -> str:
    """``rel`` is relative to the workspace root and already resolved (no ``..``, no symlink in it)."""
    path = PurePosixPath(rel)
    parts = path.parts
    if not parts or parts == (".",) or ".." in parts or path.is_absolute():
        return OWNER  # not a resolved workspace path: nothing is public about it
    if parts[0] == PUBLIC_DIR or (len(parts) == 1 and parts[0] in PERSONA_FILES):
        return PUBLIC
    if any(_matches(parts, PurePosixPath(pattern.strip("/")).parts) for pattern in shared):
        return PUBLIC
    if len(parts) >= 2 and parts[0] in CHAT_DIRS and _is_chat_id(parts[1]):
        return principals.chat_label(int(parts[1]))
    return OWNER


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """A glob as people write them: ``*`` stays inside one folder, ``**`` spans any number of them, so
    ``notes/*.md`` does not make ``notes/private/diary.md`` public."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _matches(parts[1:], pattern[1:])


def is_document(rel: PurePosixPath | str) -> bool:
    return PurePosixPath(rel).as_posix().startswith(DOCUMENT_PLACES)


def chat_dir(kind: str, chat_id: int) -> PurePosixPath:
    """Where files of one chat live (``downloads/<id>`` or ``chats/<id>``); their label is the chat's."""
    if kind not in CHAT_DIRS:
        raise ValueError(kind)
    return PurePosixPath(kind, str(int(chat_id)))


def _is_chat_id(part: str) -> bool:
    digits = part[1:] if part.startswith("-") else part
    return digits.isdigit() and not digits.startswith("0")


def skill_of(rel: PurePosixPath | str) -> str | None:
    """The skill whose folder holds ``rel`` (a resolved workspace path), or None. A skill archived or staged
    (``skills/.archive/<name>/…``) is still that skill."""
    parts = PurePosixPath(rel).parts
    for root in SKILL_ROOTS:
        head = PurePosixPath(root).parts
        rest = parts[len(head) :] if parts[: len(head)] == head else ()
        if rest and rest[0].startswith("."):
            rest = rest[1:]
        if rest:
            return rest[0]
    return None


def in_skill_root(rel: PurePosixPath | str) -> bool:
    """Whether ``rel`` is a skill root or lies inside one (the agent's own writes never land there)."""
    text = PurePosixPath(rel).as_posix()
    return any(text == root or text.startswith(root + "/") for root in SKILL_ROOTS)
