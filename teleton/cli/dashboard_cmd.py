"""`teleton dashboard`: the dashboard without a daemon (issue 35), read-only: the status file's record and
the database opened read-only; nothing changes from it. The daemon serves the same pages with
``web.enabled``."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from teleton.cli.context import cli_config
from teleton.config import Config
from teleton.config.schema import WebConfig
from teleton.daemon.dashboard import dashboard_token, start_dashboard
from teleton.daemon.status_file import read_status
from teleton.providers.extras import MissingExtra, require


def dashboard(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="Listen here instead of web.host.")] = None,
    port: Annotated[int | None, typer.Option(help="Listen on this port instead of web.port (0: any free one).")] = None,
) -> None:
    """Serve the dashboard read-only from this shell (Ctrl-C stops it): status, and what waits for you."""
    config = cli_config(ctx)
    try:
        require("web", "teleton dashboard")
        web = WebConfig.model_validate(
            {
                **config.web.model_dump(),
                "host": host or config.web.host,
                "port": config.web.port if port is None else port,
            }
        )
    except MissingExtra as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    except ValidationError as exc:  # a setting or option the owner gave: one line, never the token, exit 2
        problems = (str(e.get("ctx", {}).get("error", e["msg"])) for e in exc.errors())
        print(f"error: {'; '.join(problems)}", file=sys.stderr)
        raise typer.Exit(2) from None
    config = config.model_copy(update={"web": web})
    status_file = config.storage.data_dir / "status.json"

    async def serve() -> None:
        from teleton.web.security import BindRefused, check_bind  # the web extra, checked above

        try:
            # Before anything is opened: no token, or a guessable one, beyond this machine is the one line.
            check_bind(web.host, web.token)
            db = await _stored(config)
            server = await start_dashboard(config, lambda: read_status(status_file), read_only=True, db=db)
        except (BindRefused, OSError) as exc:
            print(f"error: the dashboard cannot listen on {web.host}:{web.port}: {exc}", file=sys.stderr)
            # A refused bind is the config's (or --host's) to fix, as config errors are: 2; the machine's: 1.
            raise typer.Exit(2 if isinstance(exc, BindRefused) else 1) from None
        _, where = await asyncio.to_thread(dashboard_token, config)
        print(f"dashboard (read-only) on http://{web.host}:{server.port}/ — log in with the token in {where}")
        print("Ctrl-C stops it", flush=True)
        await server.wait()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


async def _stored(config: Config) -> Any:
    """The database opened read-only beside a running daemon; None (the status alone) when it cannot be, said."""
    # Deferred: the store loads when the dashboard starts, so `teleton --help` stays fast.
    from teleton.storage.database import Database, ReadOnlyMismatch
    from teleton.storage.failures import StorageError

    try:
        return await Database.open(config.storage.database_file, readonly=True, vectors=False)
    except (StorageError, ReadOnlyMismatch, FileNotFoundError) as exc:
        print(f"the memory pages stay empty: {exc}", file=sys.stderr)
        return None
