"""Helpers for writing skill folders and the git repositories they come from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,  # the machine's git settings (signing, hooks) play no part
    "GIT_CONFIG_NOSYSTEM": "1",
}


def write_skill(folder: Path, name: str | None = None, *, description: str = "What it does and when to use it.",
                body: str = "# Steps\n\n1. Do the thing.\n", front: str = "",
                files: dict[str, str | bytes] | None = None) -> Path:  # fmt: skip
    """``folder/SKILL.md`` (front matter: ``name``, default the folder's; ``description``; then ``front``) and
    ``files`` beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    head = f"name: {folder.name if name is None else name}\n" if name != "" else ""
    (folder / "SKILL.md").write_text(f"---\n{head}description: {description}\n{front}---\n{body}", encoding="utf-8")
    for rel, content in (files or {}).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def commit(repo: Path, message: str = "skills") -> str:
    """Everything in ``repo`` committed (a new repository on the first call); its file:// URL."""
    if not (repo / ".git").is_dir():
        git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--message", message)
    return repo.as_uri()
