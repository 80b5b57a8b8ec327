"""What a program Teleton starts inherits of its environment: an allow-list, the same for every child (an
``exec`` command, an MCP server over stdio). Everything else — ANTHROPIC_API_KEY, TELETON_*, tokens, the
config's path — stays out."""

from __future__ import annotations

import os
from collections.abc import Mapping

SAFE_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def scrubbed_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables of ``environ`` (this process's by default), with a PATH."""
    source = os.environ if environ is None else environ
    env = {name: source[name] for name in SAFE_ENV if name in source}
    env.setdefault("PATH", DEFAULT_PATH)
    return env
