"""The `teleton` command."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from teleton import __version__
from teleton.cli.context import cli_config, opened, state
from teleton.cli.errors import explain
from teleton.config import ConfigError
from teleton.daemon.health import StartupError
from teleton.daemon.instance_lock import AlreadyRunning
from teleton.daemon.status_file import describe, free_space, read_status
from teleton.gateway.contract import GatewayError
from teleton.storage.sqlite_driver import pick_driver
from teleton.storage.workspace_template import create_workspace

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
    driver = pick_driver()
    console.print(
        f"teleton {__version__} (Python {sys.version.split()[0]}, SQLite {driver.sqlite_version} via {driver.name})"
    )


@app.command()
def init(ctx: typer.Context) -> None:
    """Create the workspace (SOUL.md, MEMORY.md, ...) from the template; existing files are kept."""
    config = cli_config(ctx)
    assert config.storage.workspace is not None
    result = create_workspace(config.storage.workspace)
    for path in result.created:
        console.print(f"[green]created[/] {path}")
    for path in result.kept:
        console.print(f"[dim]kept[/]    {path}")
    console.print(f"Workspace ready: {config.storage.workspace}")


@app.command()
def doctor(
    ctx: typer.Context,
    online: Annotated[bool, typer.Option("--online", help="Also call the API and Telegram (network).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON list of checks on stdout.")] = False,
) -> None:
    """Check Python, SQLite, FTS5, sqlite-vec, the embedding model, config, data dir, database, Telegram
    session and API key; every check is listed, each OK, FAIL (with the fix) or SKIP."""
    from teleton.cli.doctor import run_checks  # deferred: the checks load for teleton doctor only

    checks = run_checks(state(ctx).config_path, online=online)
    if as_json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    for check in checks if not as_json else []:
        mark = {True: "[green]OK  [/]", False: "[red]FAIL[/]", None: "[yellow]SKIP[/]"}[check.ok]
        line = f"{mark} {check.name:<22} {check.detail}"
        if check.ok is False and check.fix:
            line += f"\n     [yellow]fix:[/] {check.fix}"
        console.print(line, highlight=False)
    if any(c.ok is False for c in checks):
        raise typer.Exit(1)


@app.command()
def start(
    ctx: typer.Context,
    transport: Annotated[
        str | None, typer.Option(hidden=True, help="loopback:SOCKET — a local chat transport for tests.")
    ] = None,
) -> None:
    """Run the daemon: archive, answer, remember. Stops cleanly on SIGTERM/SIGINT; SIGHUP reloads config."""
    from teleton.daemon.runner import run_daemon  # deferred: daemon, agent and models load for teleton start only

    config = cli_config(ctx)
    try:
        code = run_daemon(config, transport)
    except (AlreadyRunning, GatewayError, StartupError) as exc:
        # Not a crash: a second instance, Telegram refusing the login, a damaged database.
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@app.command()
def status(ctx: typer.Context) -> None:
    """Is the daemon running? Uptime, queue depth, archive size and the last error (works from any shell)."""
    config = cli_config(ctx)
    data_dir = config.storage.data_dir
    running, text = describe(read_status(data_dir / "status.json"), free_bytes=free_space(data_dir))
    console.print(text, highlight=False)
    if not running:
        raise typer.Exit(1)


@app.command()
def backup(
    ctx: typer.Context,
    target: Annotated[Path, typer.Argument(help="Where to write the copy of the database.")],
) -> None:
    """Copy the database consistently while the daemon keeps running (SQLite backup API)."""
    config = cli_config(ctx)
    if not config.storage.database_file.exists():
        console.print(f"no database at {config.storage.database_file}")
        raise typer.Exit(1)
    if target.exists():
        console.print(f"{target} exists; choose a new file name")
        raise typer.Exit(1)
    if not target.parent.is_dir():
        console.print(f"{target.parent} is not a folder; create it first")
        raise typer.Exit(1)

    async def _copy() -> None:
        async with opened(config) as db:
            await db.backup(target)

    asyncio.run(_copy())
    console.print(f"backup written: {target}")


def _register_subcommands() -> None:
    # Each module imports its heavy dependencies (Telethon, ONNX Runtime) inside its commands, so
    # `teleton --help` stays fast.
    from teleton.cli import chat_cmd, feed_cmd, memory_cmd, memory_io, models_cmd, setup_cmd

    app.command()(setup_cmd.setup)
    app.command()(models_cmd.models)
    app.command()(chat_cmd.chat)
    memory_io.register(memory_cmd.app)
    app.add_typer(memory_cmd.app, name="memory", help="Memory: index, search, stats, facts, forget, export, import.")
    app.add_typer(feed_cmd.app, name="feed", help="The Telegram archive: backfill, search, stats.")


_register_subcommands()


def run() -> None:
    """Console-script entry point: config problems are one line on stderr and exit code 2; what the machine
    does to a command (unwritable folder, full disk, damaged database) one line and exit code 1."""
    try:
        app()
    except ConfigError as exc:
        # Plain print: a config error must stay one line whatever the terminal width.
        print(f"config error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:
        line = explain(exc)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run()
