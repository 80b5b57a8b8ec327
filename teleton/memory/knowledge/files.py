"""Which workspace files are knowledge, and how one file becomes planned chunks with its privacy label."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from teleton.memory.knowledge.chunker import chunk_markdown
from teleton.memory.knowledge.rows import PlannedChunk, chunk_hash
from teleton.privacy import Principals, path_label
from teleton.privacy.paths import in_skill_root
from teleton.privacy.quoting import origin_at
from teleton.storage.private_files import read_confined

PUBLIC_DIR = "public"
# The one rule for which workspace files are knowledge (index, watcher, export and import, the memory tools):
# MEMORY.md and every .md file at any depth of these folders, except inside a dot-folder (an editor's, a trash)
# and the skills under public/ (procedures read with skill_read, never searched as knowledge).
KNOWLEDGE_DIRS = ("memory", PUBLIC_DIR)


def is_knowledge(rel: str) -> bool:
    """Whether the workspace path ``rel`` (relative, "/"-separated) is a knowledge file by name."""
    path = PurePosixPath(rel)
    parts = path.parts
    if path.suffix != ".md" or any(p.startswith(".") for p in parts):  # also refuses ".." and "/x"
        return False
    if in_skill_root(path):
        return False
    return parts == ("MEMORY.md",) or (len(parts) > 1 and parts[0] in KNOWLEDGE_DIRS)


def knowledge_files(workspace: Path) -> list[Path]:
    """The knowledge files in the workspace, in a stable order; a linked folder is not entered (os.walk)."""
    files = [workspace / "MEMORY.md"] if (workspace / "MEMORY.md").is_file() else []
    for folder in KNOWLEDGE_DIRS:
        found = []
        for root, dirs, names in os.walk(workspace / folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            found += [Path(root, n) for n in names if n.endswith(".md") and Path(root, n).is_file()]
        files += sorted(p for p in found if is_knowledge(p.relative_to(workspace).as_posix()))
    return files


def plan_file(
    workspace: Path,
    path: Path,
    target: int,
    limit: int,
    *,
    principals: Principals | None = None,
    shared: Sequence[str] = (),
) -> list[PlannedChunk]:
    rel = path.relative_to(workspace).as_posix()
    text, real_rel = read_confined(workspace, path)
    # The label follows where the content really is: public/x.md -> ../MEMORY.md stays the owner's.
    label = path_label(real_rel, principals or Principals(), shared)
    planned = []
    line_starts = [0, *(m.end() for m in re.finditer("\n", text))]
    for chunk in chunk_markdown(text, target, limit):
        body = chunk.text.strip()
        # A chunk cut from inside words quoted from elsewhere keeps their origin (its first line names it).
        carried = origin_at(text, line_starts[chunk.start_line]) if ">" in body else ""
        body = f"{carried}\n{body}" if carried and body else body
        if body:
            digest = chunk_hash(chunk.heading, body, label)
            planned.append(PlannedChunk(rel, chunk.heading, body, digest, chunk.start_line, label))
    return planned
