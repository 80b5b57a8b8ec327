"""One skill as it lies on disk: a folder with ``SKILL.md`` in the open Agent Skills layout (docs/skills.md).

``SKILL.md`` is YAML front matter (``name``, ``description``; optional ``license``, ``compatibility``,
``metadata``, ``allowed-tools``) and a Markdown body; any other files beside it are the skill's too. A skill
is read whole or not at all: bad front matter, a name that is not the folder's, a file over its cap, a link
out of the folder — one line naming the file (``SkillError``), and the skill is left out.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from teleton.privacy.paths import SKILL_ROOTS

SKILL_FILE = "SKILL.md"
# Where skills live in the workspace; a skill's label is its folder's (``privacy.path_label``): the owner's, or
# everyone's under public/.
ROOTS = SKILL_ROOTS
NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
NAME_MAX, DESCRIPTION_MAX, COMPATIBILITY_MAX = 64, 1024, 500  # the Agent Skills specification's limits
FILE_CAP = 256 * 1024  # bytes of one file
TOTAL_CAP = 2 * 1024 * 1024  # bytes of a whole skill
FILES_MAX = 200


NAME_RULE = f"1-{NAME_MAX} lowercase letters, digits and single hyphens"


def is_name(name: str) -> bool:
    """The specification's rule for a skill's name (and so its folder's)."""
    return len(name) <= NAME_MAX and NAME.match(name) is not None


class SkillError(ValueError):
    """A skill that cannot be loaded; the message is one line naming the file."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    folder: Path
    root: str  # one of ROOTS
    files: dict[str, str]  # path inside the folder -> SHA-256 of its bytes, SKILL.md included
    license: str = ""
    compatibility: str = ""
    allowed_tools: tuple[str, ...] | None = None  # None: the skill names none (nothing is narrowed)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def rel(self) -> str:
        """The folder relative to the workspace: what its label is read from."""
        return f"{self.root}/{self.name}"

    @property
    def digest(self) -> str:
        return files_digest(self.files)


def files_digest(files: dict[str, str]) -> str:
    """One SHA-256 for every file of a skill: an approval is bound to it."""
    return hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()


def read_skill(folder: Path, root: str = ROOTS[0]) -> Skill:
    """The skill in ``folder``, or ``SkillError``."""
    skill_md = folder / SKILL_FILE
    where = _shown(skill_md)
    if folder.is_symlink():
        raise SkillError(f"{_shown(folder)}: a link, not a folder (a skill is copied in, never linked)")
    if not skill_md.is_file() or skill_md.is_symlink():
        raise SkillError(f"{where}: no SKILL.md file in the skill's folder")
    files = _hashed(folder)
    try:
        text = skill_md.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SkillError(f"{where}: not UTF-8 text") from None
    front, body = split_front_matter(text, where)
    name = _text(front, "name", where, required=True)
    if not is_name(name):
        raise SkillError(f"{where}: name {name!r} must be {NAME_RULE}")
    if name != folder.name:
        raise SkillError(f"{where}: name {name!r} is not the folder's name {folder.name!r}")
    description = _text(front, "description", where, required=True)
    if len(description) > DESCRIPTION_MAX:
        raise SkillError(f"{where}: description longer than {DESCRIPTION_MAX} characters")
    compatibility = _text(front, "compatibility", where)
    if len(compatibility) > COMPATIBILITY_MAX:
        raise SkillError(f"{where}: compatibility longer than {COMPATIBILITY_MAX} characters")
    metadata = front.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise SkillError(f"{where}: metadata must be a mapping of names to text")
    return Skill(
        name=name, description=" ".join(description.split()), body=body.strip(), folder=folder, root=root,
        files=files, license=_text(front, "license", where), compatibility=compatibility,
        allowed_tools=_allowed_tools(front.get("allowed-tools"), where),
        metadata={str(k): str(v) for k, v in metadata.items()},
    )  # fmt: skip


def split_front_matter(text: str, where: str) -> tuple[dict[str, object], str]:
    """``---``-fenced YAML and the Markdown after it."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{where}: SKILL.md must begin with '---' front matter (name, description)")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise SkillError(f"{where}: the front matter is not closed by a '---' line")
    try:
        front = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 2})" if mark is not None else ""
        raise SkillError(f"{where}: front matter is not valid YAML{at}") from None
    if not isinstance(front, dict):
        raise SkillError(f"{where}: front matter must be a mapping (name: …, description: …)")
    return front, "".join(lines[end + 1 :])


def _text(front: dict[str, object], key: str, where: str, *, required: bool = False) -> str:
    value = front.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise SkillError(f"{where}: front matter has no {key}")
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise SkillError(f"{where}: {key} must be text")
    return str(value).strip()


def _allowed_tools(value: object, where: str) -> tuple[str, ...] | None:
    """The specification's space-separated string; a YAML list is taken too (some collections write one)."""
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(value.replace(",", " ").split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise SkillError(f"{where}: allowed-tools must be tool names separated by spaces")


def _hashed(folder: Path) -> dict[str, str]:
    """Every file of the skill (a ``.git`` folder aside) and its hash; a link leaving the folder, a file over
    the cap or too many files refuse the whole skill."""
    real_root = Path(os.path.realpath(folder))
    files: dict[str, str] = {}
    total = 0
    for base, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for entry in [*dirs, *sorted(names)]:
            path = Path(base, entry)
            real = Path(os.path.realpath(path))
            if path.is_symlink() and not real.is_relative_to(real_root):
                raise SkillError(f"{_shown(path)}: a link out of the skill's folder")
            if entry in dirs:
                continue
            if not path.is_file():
                raise SkillError(f"{_shown(path)}: not a regular file")
            size = path.stat().st_size
            total += size
            if size > FILE_CAP:
                raise SkillError(f"{_shown(path)}: {size:,} bytes, over the {FILE_CAP:,}-byte cap of a skill's file")
            if total > TOTAL_CAP or len(files) >= FILES_MAX:
                raise SkillError(f"{_shown(folder)}: over {TOTAL_CAP:,} bytes or {FILES_MAX} files in one skill")
            files[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def _shown(path: Path) -> str:
    """A path as an error names it: from the skills root down (``skills/x/SKILL.md``) when it lies in one."""
    parts = path.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == "skills":
            start = i - 1 if i > 0 and parts[i - 1] == "public" else i
            return "/".join(parts[start:])
    return str(path)


def scan(workspace: Path) -> tuple[list[Skill], list[str]]:
    """Every skill in the workspace's roots, by name, and one line for each left out. A folder whose name
    starts with a dot (drafts, the archive, staged updates) holds no skill; of two skills of one name, the
    first root's is kept."""
    skills: dict[str, Skill] = {}
    errors: list[str] = []
    for root in ROOTS:
        base = workspace / root
        if not base.is_dir() or base.is_symlink():
            continue
        for folder in sorted(base.iterdir()):
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            try:
                skill = read_skill(folder, root)
            except SkillError as exc:
                errors.append(str(exc))
                continue
            except OSError as exc:
                errors.append(f"{_shown(folder)}: cannot be read ({exc.strerror or exc})")
                continue
            if skill.name in skills:
                taken = skills[skill.name].rel
                errors.append(f"{_shown(folder / SKILL_FILE)}: name {skill.name!r} is taken by {taken}")
                continue
            skills[skill.name] = skill
    return sorted(skills.values(), key=lambda s: s.name), errors
