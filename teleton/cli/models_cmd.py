"""`teleton models`: the provider presets, for choosing ``agent.provider``."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from teleton.config.presets import PRESETS, Preset


def models() -> None:
    """List the model providers: base URL, key variable, and whether tools, vision and prompt caching work."""
    table = Table("provider", "base URL", "key variable", "tools", "vision", "caching", "context")
    for p in PRESETS.values():
        table.add_row(*row(p))
    # Wide enough that a URL is never cut: the table is read to copy from.
    Console(width=160).print(table)
    print("Set agent.provider and agent.model; agent.base_url and agent.api_key override a preset.")


def row(p: Preset) -> list[str]:
    yes = {True: "yes", False: "no"}
    return [
        p.name,
        p.base_url or ("(agent.base_url)" if p.family == "openai" else "(SDK default)"),
        p.key_env or ("agent.api_key, if any" if p.base_url is None else "none (local)"),
        yes[p.tools],
        yes[p.vision],
        yes[p.caching],
        f"{p.context_window:,}",
    ]
