"""The `teleton` command."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from teleton import __version__
from teleton.backup.schedule import read_record
from teleton.cli.context import cli_config, running_config, state
from teleton.cli.errors import explain
from teleton.cli.help_format import App
from teleton.config import ConfigError
from teleton.daemon.health import StartupError
from teleton.daemon.instance_lock import AlreadyRunning
from teleton.daemon.status_file import describe, free_space, read_status, summary
from teleton.gateway.contract import GatewayError
from teleton.process.logging import configure_logging
from teleton.process.threads import limit_blas_threads
from teleton.storage.in_use import InUse
from teleton.storage.sqlite_driver import pick_driver
from teleton.storage.workspace_template import create_workspace

EXIT_CODES = (
    "Exit codes: 0 ok; 1 failure (a check failed, the daemon is not running, the machine refused); "
    "2 usage or config error; 78 the daemon stopped on a fatal error a restart cannot fix; 130 interrupted."
)
app = App(
    help="Teleton: an AI agent on Telegram with a memory you can trust.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        version()
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="Config file (default: $TELETON_CONFIG or ~/.teleton/config.yaml)."),
    ] = None,
    insecure_config: Annotated[
        bool,
        typer.Option("--insecure-config", help="Run even though the config file holds secrets that others may read."),
    ] = False,
    show_version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit.")
    ] = False,
) -> None:
    # Logs never on stdout (it holds the output): warnings and errors, one line each, on stderr. `start` and
    # `chat` set up their own logging from the config.
    configure_logging("warning", "human")
    limit_blas_threads()  # every command, the daemon and `teleton chat` included (process/threads.py)
    state(ctx).config_path = config
    state(ctx).insecure_config = insecure_config


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
    """Check the machine and the setup; every check is listed, each OK, FAIL (with the fix) or SKIP.

    Python, SQLite, FTS5, sqlite-vec, the embedding model, config and file modes, data dir, database,
    Telegram session, API keys. Exit code 1 when a check fails."""
    from teleton.cli.doctor import run_checks  # deferred: the checks load for teleton doctor only

    checks = run_checks(state(ctx).config_path, online=online)
    if as_json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    for check in checks if not as_json else []:
        mark = {True: "[green]OK  [/]", False: "[red]FAIL[/]", None: "[yellow]SKIP[/]"}[check.ok]
        line = f"{mark} {check.name:<22} {escape(check.detail)}"  # escape: "teleton[voice]" is no markup
        if check.ok is False and check.fix:
            line += f"\n     [yellow]fix:[/] {escape(check.fix)}"
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

    config = running_config(ctx)
    try:
        code = run_daemon(config, transport)
    except (AlreadyRunning, InUse, GatewayError, StartupError) as exc:
        # Not a crash: a second instance, Telegram refusing the login, a damaged database.
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    raise typer.Exit(code)


@app.command()
def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout (the same exit code).")] = False,
) -> None:
    """Is the daemon running? Uptime, queue depth, archive size and the last error (works from any shell);
    exit code 1 when it is not running or not answering. --json adds today's model use from the database."""
    config = cli_config(ctx)
    data_dir = config.storage.data_dir
    found, free = read_status(data_dir / "status.json"), free_space(data_dir)
    running, text = describe(found, free_bytes=free)
    last_backup = read_record(data_dir)
    text += f"\nlast backup: {last_backup.line() if last_backup else 'none yet (teleton backup, or backup.every)'}"
    if as_json:
        shown = summary(found, free_bytes=free) | asyncio.run(_usage_today(config.storage.database_file))
        shown["last_backup"] = asdict(last_backup) if last_backup else None
        typer.echo(json.dumps(shown, indent=2))
    else:
        console.print(text, highlight=False)
    if not running:
        raise typer.Exit(1)


async def _usage_today(database: Path) -> dict[str, Any]:
    """``today``: the day's turns, tokens, prompt-cache hit rate and spend of every chat, from the usage ledger
    (the daemon's status record carries none), read-only beside a running daemon; else null and why."""
    # Deferred: the store loads for --json only, so `teleton status` stays quick.
    from teleton.storage import usage
    from teleton.storage.database import Database, ReadOnlyMismatch
    from teleton.storage.failures import StorageError

    try:
        db = await Database.open(database, readonly=True, vectors=False, readers=1)
    except (StorageError, ReadOnlyMismatch, FileNotFoundError) as exc:
        return {"today": None, "today_unavailable": str(exc)}
    day = usage.today()
    try:
        spent = await db.read(lambda conn: usage.spent(conn, day, day))
    finally:
        await db.close()
    return {"today": {"day": day, **spent.as_dict()}}


def _register_subcommands() -> None:
    # Each module imports its heavy dependencies (Telethon, ONNX Runtime) inside its commands, so
    # `teleton --help` stays fast.
    from teleton.cli import (
        backup_cmd,
        chat_cmd,
        dashboard_cmd,
        feed_cmd,
        mcp_cmd,
        memory_cmd,
        memory_io,
        models_cmd,
        setup_cmd,
        skills_cmd,
    )

    app.command()(setup_cmd.setup)
    app.command()(models_cmd.models)
    app.command()(dashboard_cmd.dashboard)
    app.command()(chat_cmd.chat)
    app.command()(backup_cmd.backup)
    app.command()(backup_cmd.restore)
    memory_io.register(memory_cmd.app)
    app.add_typer(memory_cmd.app, name="memory", help="Memory: index, search, stats, facts, forget, export, import.")
    app.add_typer(feed_cmd.app, name="feed", help="The Telegram archive: backfill, search, stats.")
    app.add_typer(mcp_cmd.app, name="mcp", help="MCP servers (outside tools): add, list, test, remove, approve.")
    app.add_typer(skills_cmd.app, name="skills", help="Skills: list, show, add, approve, update, remove, restore.")


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
