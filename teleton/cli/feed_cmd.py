"""`teleton feed …`: import a chat's history, search the archive, show what it holds."""

from __future__ import annotations

import asyncio
import importlib
import json
from dataclasses import asdict, replace
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from telethon import TelegramClient
from telethon.sessions import SQLiteSession, StringSession

from teleton.cli.context import cli_config, cli_embedder, read_or_exit
from teleton.cli.help_format import App
from teleton.cli.memory_cmd import require_query
from teleton.config import require_telegram
from teleton.config.schema import Config, resolved, session_file
from teleton.memory.feed.archive import stats
from teleton.storage import Database
from teleton.text.counts import counted

app = App(help="The Telegram feed archive.", no_args_is_help=True)
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)  # warnings: stdout holds the command's output


@app.command("backfill")
def backfill_cmd(
    ctx: typer.Context,
    chat: Annotated[str, typer.Argument(help="Chat id, @username or t.me link.")],
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="At most this many messages.")] = None,
) -> None:
    """Import a chat's history into the archive (newest first; archived messages are kept, never answered)."""
    config = cli_config(ctx)
    tg = config.telegram
    session = session_file(tg.session_path) if tg.session_path else None
    if session is None or not session.exists() or tg.api_id is None or not tg.api_hash:
        console.print("[red]error:[/] not logged in to Telegram yet: run `teleton setup` first")
        raise typer.Exit(1)
    try:
        result = asyncio.run(_backfill(config, chat, limit))
    except Exception as exc:  # GatewayError, LoginError, network: one line, not a traceback
        console.print(f"[red]backfill failed:[/] {exc}")
        raise typer.Exit(1) from None
    name, fetched = result.title or result.chat_id, counted(result.fetched, "message")
    console.print(f"[green]done[/] {name}: {fetched} fetched, {result.new} new (chat id {result.chat_id})")


async def _backfill(config: Config, chat: str, limit: int | None) -> Any:
    from teleton.telegram.receive.history import backfill  # deferred: Telethon's client, for feed sync only

    tg, login = config.telegram, require_telegram(config)
    # A copy of the login in memory: the daemon may be using the session file right now.
    disk = SQLiteSession(str(session_file(resolved(tg.session_path, "telegram.session_path"))))
    try:
        copy = StringSession.save(disk)
    finally:
        disk.close()
    client = TelegramClient(StringSession(copy), login.api_id, login.api_hash, flood_sleep_threshold=0)
    db = await Database.open(config.storage.database_file)
    try:
        await client.connect()
        if not await client.is_user_authorized():
            raise RuntimeError("the Telegram session is not logged in: run `teleton setup`")
        with Progress(
            SpinnerColumn(),
            TextColumn("[bold]backfill[/] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task(str(chat), total=limit)
            return await backfill(
                client,
                db,
                chat,
                limit=limit,
                flood_wait_max_s=tg.flood_wait_max_s,
                progress=lambda n: progress.advance(task, n),
            )
    finally:
        await client.disconnect()
        await db.close()


@app.command("search")
def search_cmd(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words to look for (any text is fine).")],
    chat: Annotated[int | None, typer.Option("--chat", help="Only this chat id.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=100, help="At most this many hits.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits as JSON.")] = False,
) -> None:
    """Search the archive (hybrid keyword + vector when embeddings are on)."""
    require_query(query)
    try:
        feed_search = importlib.import_module("teleton.memory.feed.search")
    except ImportError:
        console.print("[red]error:[/] feed search is not available in this build (teleton.memory.feed.search)")
        raise typer.Exit(1) from None
    config = cli_config(ctx)
    hits = asyncio.run(_search(config, feed_search, query, chat, limit))
    if as_json:
        typer.echo(json.dumps([asdict(h) for h in hits], ensure_ascii=False, indent=2))
        return
    if not hits:
        console.print("no matches")
        raise typer.Exit(0)
    table = Table("score", "when", "chat", "from", "text", show_lines=False)
    for hit in hits:
        table.add_row(*_hit_row(hit))
    console.print(table)


async def _search(config: Config, feed_search: Any, query: str, chat: int | None, limit: int) -> list[Any]:
    """The archive's best messages as the owner's turns see them (``memory.recall.messages``): the facts found
    for the query as extra keys of their messages, and the configured reranker."""
    # Deferred: the search stack, for feed search only
    from teleton.memory import recall
    from teleton.memory.embeddings.query import embed_query
    from teleton.memory.rerank import configured_reranker
    from teleton.memory.search.hybrid import configured_params
    from teleton.privacy import OWNER, Clearance, Principals

    provider = cli_embedder(config, err_console)
    embedding = (provider.model_id, provider.dims) if provider is not None else None
    db = await Database.open(config.storage.database_file, embedding=embedding)
    reranker = None
    try:
        reranker = await configured_reranker(config.memory.reranker)
        params = replace(configured_params(config), limit=limit)
        q = recall.Question(query, await embed_query(provider, query) if db.vectors else None, Clearance(OWNER))
        facts = await db.read(lambda conn: recall.shown_facts(conn, q, params, limit, lambda _: True))
        hits = await recall.messages(
            db, q, params, Principals.from_telegram(config.telegram), facts,
            reranker=reranker, candidates=config.memory.reranker.candidates, chats=None if chat is None else [chat],
        )  # fmt: skip
        return [feed_search.feed_hit(h) for h in hits]
    finally:
        if reranker is not None:
            reranker.close()
        await db.close()


def _hit_row(hit: Any) -> tuple[str, str, str, Text, Text]:
    def get(name: str, default: Any = "") -> Any:
        if isinstance(hit, dict):
            return hit.get(name, default)
        value = getattr(hit, name, None)
        if value is None and hasattr(hit, "row"):
            value = (hit.row or {}).get(name)
        return default if value is None else value

    date = get("date", None)
    when = datetime.fromtimestamp(float(date)).strftime("%Y-%m-%d %H:%M") if date else ""
    text = str(get("text")).replace("\n", " ")
    sender = Text(str(get("sender_name")))  # what people wrote, never rich markup
    return f"{float(get('score', 0.0)):.2f}", when, str(get("chat_id")), sender, Text(text[:120])


@app.command("stats")
def stats_cmd(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False
) -> None:
    """How much the archive holds: messages, chats, users, edits, deletions, embeddings, busiest chats."""
    s = read_or_exit(ctx, stats, console, "archive", as_json=as_json)
    if as_json:
        per_chat = [{"chat_id": c, "title": t, "messages": n} for c, t, n in s.per_chat]
        typer.echo(json.dumps({**asdict(s), "per_chat": per_chat}, ensure_ascii=False, indent=2))
        return
    pct = f"{100 * s.embedded / s.messages:.0f}%" if s.messages else "-"
    console.print(
        f"messages {s.messages:,}  chats {s.chats:,}  users {s.users:,}  edited {s.edited:,}  "
        f"deleted {s.deleted:,}  embedded {s.embedded:,} ({pct})"
    )
    if s.per_chat:
        table = Table("chat id", "title", "messages")
        for chat_id, title, count in s.per_chat:
            table.add_row(str(chat_id), Text(title), f"{count:,}")
        console.print(table)
