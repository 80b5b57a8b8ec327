"""What every CLI command shares: the chosen config path, loaded on demand."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from teleton.config import Config, load_config, require_private_config
from teleton.memory.embeddings import create_provider
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.storage import Database
from teleton.storage.sqlite_driver import Connection

T = TypeVar("T")


@dataclass
class CliState:
    config_path: Path | None = None
    insecure_config: bool = False  # --insecure-config: run with a config others may read


def state(ctx: typer.Context) -> CliState:
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj


def cli_config(ctx: typer.Context) -> Config:
    """Load the config the user pointed at with -c (or the default); errors become exit code 2 in main."""
    return load_config(state(ctx).config_path)


def running_config(ctx: typer.Context) -> Config:
    """The config for a command that runs the agent (start, chat): also refused while it holds a secret that
    group or others may read, unless --insecure-config says otherwise."""
    config = cli_config(ctx)
    if not state(ctx).insecure_config:
        require_private_config(config)
    return config


def cli_embedder(config: Config, console: Console) -> EmbeddingProvider | None:
    """The configured embedding provider, or None (keyword-only search) when it is off or cannot load here."""
    if config.embedding.provider == "none":
        return None
    try:
        return create_provider(config.embedding)
    except Exception as exc:
        console.print(f"[yellow]embeddings unavailable ({escape(str(exc))}); keyword search only[/]")
        return None


@asynccontextmanager
async def opened(config: Config) -> AsyncIterator[Database]:
    """The configured database, open for one command and closed after it."""
    db = await Database.open(config.storage.database_file)
    try:
        yield db
    finally:
        await db.close()


def read_or_exit(
    ctx: typer.Context, read: Callable[[Connection], T], console: Console, what: str, *, as_json: bool = False
) -> T:
    """``read`` run once on the configured database, for a command that only looks: with none yet (looking
    must not create an empty one) it says ``no {what} yet`` (as JSON: ``null``) and exits 0."""
    config = cli_config(ctx)
    if not config.storage.database_file.exists():
        if as_json:
            typer.echo(json.dumps(None))
        else:
            console.print(f"no {what} yet at {config.storage.database_file}")
        raise typer.Exit(0)

    async def _read() -> T:
        async with opened(config) as db:
            return await db.read(read)

    return asyncio.run(_read())
