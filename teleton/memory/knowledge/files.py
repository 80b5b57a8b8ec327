"""Which workspace files are knowledge, and how one file becomes planned chunks with its privacy label."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from teleton.memory.knowledge.chunker import chunk_markdown
from teleton.memory.knowledge.rows import PlannedChunk, chunk_hash
from teleton.privacy import Principals, path_label
from teleton.privacy.quoting import origin_at
from teleton.storage.private_files import read_confined

PUBLIC_DIR = "public"


def knowledge_files(workspace: Path) -> list[Path]:
    files = [workspace / "MEMORY.md"] if (workspace / "MEMORY.md").is_file() else []
    memory_dir = workspace / "memory"
    if memory_dir.is_dir():
        files += sorted(p for p in memory_dir.glob("*.md") if p.is_file())
    public_dir = workspace / PUBLIC_DIR
    if public_dir.is_dir():
        files += sorted(p for p in public_dir.rglob("*.md") if p.is_file())
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
