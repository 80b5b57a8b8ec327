"""Create a workspace from the bundled template without touching anything that already exists.

The workspace holds the owner's private notes, so it and every folder and file created here are 0700/0600
whatever the umask (existing files keep their content; their modes are narrowed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from teleton.storage.private_files import make_private, private_dir, write_private

PROMPT_FILES = ("SOUL.md", "IDENTITY.md", "USER.md", "MEMORY.md", "STRATEGY.md", "SECURITY.md", "HEARTBEAT.md")
SUBDIRS = ("memory", "learnings", "downloads", "public")


def template_dir() -> Path:
    return Path(str(resources.files("teleton") / "workspace_template"))


@dataclass
class InitResult:
    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


def create_workspace(dest: Path) -> InitResult:
    """Copy each template file that is missing in ``dest``; existing files are kept as they are."""
    result = InitResult()
    private_dir(dest)
    for sub in SUBDIRS:
        private_dir(dest / sub)
    source = template_dir()
    for src in sorted(source.rglob("*")):
        if not src.is_file() or src.name == ".gitkeep":
            continue
        target = dest / src.relative_to(source)
        if target.exists():
            if target.is_file() and not target.is_symlink():
                make_private(target)
            result.kept.append(target)
            continue
        write_private(target, src.read_text(encoding="utf-8"), stop_at=dest)
        result.created.append(target)
    return result
