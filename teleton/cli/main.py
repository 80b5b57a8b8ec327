"""The `teleton` command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from teleton import __version__
from teleton.cli.context import cli_config, state
from teleton.config import ConfigError

app = typer.Typer(
    help="Teleton: an AI agent on Telegram with a memory you can trust.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(soft_wrap=True)


@app.callback()
def main(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="Config file (default: $TELETON_CONFIG or ~/.teleton/config.yaml)."),
    ] = None,
) -> None:
    state(ctx).config_path = config


@app.command()
def version() -> None:
    """Print Teleton's version and the SQLite it runs on."""
    from teleton.storage.sqlite_driver import pick_driver

    driver = pick_driver()
    console.print(
        f"teleton {__version__} (Python {sys.version.split()[0]}, SQLite {driver.sqlite_version} via {driver.name})"
    )


@app.command()
def init(ctx: typer.Context) -> None:
    """Create the workspace (SOUL.md, MEMORY.md, ...) from the template; existing files are kept."""
    from teleton.workspace.template import create_workspace

    config = cli_config(ctx)
    assert config.storage.workspace is not None
    result = create_workspace(config.storage.workspace)
    for path in result.created:
        console.print(f"[green]created[/] {path}")
    for path in result.kept:
        console.print(f"[dim]kept[/]    {path}")
    console.print(f"Workspace ready: {config.storage.workspace}")


@app.command()
def doctor(ctx: typer.Context) -> None:
    """Check Python, SQLite, FTS5, sqlite-vec, the embedding model, config, Telegram session and API key."""
    from teleton.cli.doctor import run_checks

    checks = run_checks(state(ctx).config_path)
    for check in checks:
        mark = "[green]OK  [/]" if check.ok else "[red]FAIL[/]"
        line = f"{mark} {check.name:<18} {check.detail}"
        if not check.ok and check.fix:
            line += f"\n     [yellow]fix:[/] {check.fix}"
        console.print(line, highlight=False)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)


def run() -> None:
    """Console-script entry point: config problems are one line on stderr and exit code 2."""
    try:
        app()
    except ConfigError as exc:
        # Plain print: a config error must stay one line whatever the terminal width.
        print(f"config error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    run()
