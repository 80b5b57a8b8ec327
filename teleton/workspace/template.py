"""Create a workspace from the bundled template without touching anything that already exists."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

PROMPT_FILES = ("SOUL.md", "IDENTITY.md", "USER.md", "MEMORY.md", "STRATEGY.md", "SECURITY.md", "HEARTBEAT.md")
SUBDIRS = ("memory", "learnings", "downloads")


def template_dir() -> Path:
    return Path(str(resources.files("teleton") / "workspace_template"))


@dataclass
class InitResult:
    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


def create_workspace(dest: Path) -> InitResult:
    """Copy each template file that is missing in ``dest``; existing files are kept as they are."""
    result = InitResult()
    dest.mkdir(parents=True, exist_ok=True)
    for sub in SUBDIRS:
        (dest / sub).mkdir(exist_ok=True)
    source = template_dir()
    for src in sorted(source.rglob("*")):
        if not src.is_file() or src.name == ".gitkeep":
            continue
        target = dest / src.relative_to(source)
        if target.exists():
            result.kept.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        result.created.append(target)
    return result
