"""`teleton memory …`: index the knowledge base, search it, show what it holds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from teleton.cli.context import cli_config, cli_embedder, opened, read_or_exit
from teleton.cli.help_format import App
from teleton.config.schema import Config
from teleton.memory.embeddings import with_cache
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.storage import Database
from teleton.storage.vector_tables import get_meta
from teleton.text.counts import counted

if TYPE_CHECKING:  # types only: the index loads with the commands that use it
    from teleton.memory.knowledge.index import KnowledgeIndex

app = App(help="The knowledge base: MEMORY.md and the .md files under memory/ and public/.", no_args_is_help=True)
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)  # warnings and errors: stdout holds the command's output


def require_query(query: str) -> None:
    """An empty query is a usage error (exit 2), not a search that finds nothing."""
    if not query.strip():
        err_console.print("error: the query is empty: say what to look for", highlight=False, markup=False)
        raise typer.Exit(2)


async def _open(config: Config) -> tuple[Database, EmbeddingProvider | None]:
    """The database and the (cached) embedding provider of ``config``; provider None = keyword-only."""
    provider = await asyncio.to_thread(cli_embedder, config, err_console)  # loading the model takes CPU
    embedding = (provider.model_id, provider.dims) if provider is not None else None
    db = await Database.open(config.storage.database_file, embedding=embedding)
    return db, with_cache(provider, db, config.embedding) if db.vectors else None


@asynccontextmanager
async def knowledge_index(config: Config) -> AsyncIterator[tuple[Database, KnowledgeIndex]]:
    """The database and its knowledge index with the configured model, open for one command."""
    # Deferred: the index and its search stack, for the commands that use it.
    from teleton.memory.knowledge.index import KnowledgeIndex

    db, provider = await _open(config)
    try:
        yield db, KnowledgeIndex.from_config(db, config, provider)
    finally:
        await db.close()


async def _index(config: Config, embedded: list[int]) -> Any:
    """``embedded`` holds [done, total] as the embedding goes (what an interrupted run can say)."""

    def progress(done: int, total: int) -> None:
        embedded[:] = [done, total]
        bar.update(task, completed=done, total=total)

    async with knowledge_index(config) as (_, index):
        with Progress(
            TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as bar:
            task = bar.add_task("embed", total=None)
            counts = await index.reindex(progress=progress)
            bar.update(task, completed=counts.embedded, total=max(counts.embedded, 1))
        return counts


@app.command("index")
def index_cmd(ctx: typer.Context) -> None:
    """Index the workspace's MEMORY.md and .md files under memory/ and public/ (only changed chunks are embedded;
    Ctrl-C keeps what is embedded so far)."""
    config = cli_config(ctx)
    embedded = [0, 0]
    try:
        counts = asyncio.run(_index(config, embedded))
    except KeyboardInterrupt:
        done, total = embedded
        where = f"{done} of {total} embedded" if total else "interrupted before embedding began"
        err_console.print(f"{where}; run `teleton memory index` again to resume", highlight=False, markup=False)
        raise typer.Exit(130) from None
    console.print(
        f"[green]indexed[/] {counted(counts.files, 'file')}: {counts.added} added, {counts.updated} updated, "
        f"{counts.removed} removed, {counts.unchanged} unchanged ({counts.embedded} embedded)"
    )


async def _search(config: Config, query: str, sources: list[str] | None, limit: int) -> list[Any]:
    async with knowledge_index(config) as (_, index):
        # The CLI runs as the operator of the machine, the owner: every label.
        return await index.search(query, labels=None, sources=sources, limit=limit)


@app.command("search")
def search_cmd(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for (any text).")],
    source: Annotated[
        list[str] | None, typer.Option("--source", "-s", help="memory, session or learned (repeatable).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=100, help="At most this many hits.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits as JSON.")] = False,
) -> None:
    """Hybrid search of the knowledge base, with scores and sources."""
    require_query(query)
    config = cli_config(ctx)
    hits = asyncio.run(_search(config, query, source or None, limit))
    if as_json:
        typer.echo(json.dumps([_hit_json(h) for h in hits], ensure_ascii=False, indent=2))
        return
    if not hits:
        console.print("no matches")
        return
    table = Table("score", "vector", "keyword", "source", "where", "text")
    for h in hits:
        where = h.meta.get("path", "") + (f" › {h.meta['heading']}" if h.meta.get("heading") else "")
        text = h.text.replace("\n", " ")
        table.add_row(
            f"{h.score:.2f}",
            f"{h.vector_score:.2f}",
            f"{h.keyword_score:.2f}",
            h.meta.get("source", ""),
            Text(where),  # what memory holds, never rich markup
            Text(text[:160] + ("…" if len(text) > 160 else "")),
        )
    console.print(table)


def _hit_json(hit: Any) -> dict[str, Any]:
    data = asdict(hit)
    if isinstance(data["meta"].get("start_line"), int):  # stored 0-based; people and editors count from 1
        data["meta"]["start_line"] += 1
    return data


def _stats(conn: Any) -> dict[str, Any]:
    def one(sql: str) -> Any:
        try:
            return conn.execute(sql).fetchone()[0]
        except Exception:  # a vector table is absent when sqlite-vec or embeddings are off
            return None

    by_source = {row[0]: row[1] for row in conn.execute("select source, count(*) from knowledge group by source")}
    return {
        "chunks": one("select count(*) from knowledge"),
        "by_source": by_source,
        "files": one("select count(distinct path) from knowledge where source = 'memory'"),
        "embedded": one("select count(*) from knowledge where embedded = 1"),
        "pending": one("select count(*) from knowledge where embedded = 0"),
        "vectors": one("select count(*) from knowledge_vec_rowids"),
        "characters": one("select coalesce(sum(length(text)), 0) from knowledge"),
        "embedding_model": get_meta(conn, "embedding_model"),
        "embedding_dims": int(dims) if (dims := get_meta(conn, "embedding_dims")) else None,  # meta holds text
        "embedding_cache": one("select count(*) from embedding_cache"),
    }


@app.command("stats")
def stats_cmd(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False
) -> None:
    """What the knowledge index holds: chunks per source, files, embedded and pending, cache size."""
    stats = read_or_exit(ctx, _stats, console, "database", as_json=as_json)
    if as_json:
        typer.echo(json.dumps(stats, indent=2))
        return
    table = Table("what", "value", show_header=False)
    table.add_row("chunks", str(stats["chunks"]))
    for source, count in sorted(stats["by_source"].items()):
        table.add_row(f"  {source}", str(count))
    table.add_row("files", str(stats["files"]))
    table.add_row("embedded / pending", f"{stats['embedded']} / {stats['pending']}")
    table.add_row("vectors", str(stats["vectors"]) if stats["vectors"] is not None else "off")
    table.add_row("model", f"{stats['embedding_model'] or '-'} ({stats['embedding_dims'] or '-'} dims)")
    table.add_row("embedding cache", str(stats["embedding_cache"]))
    console.print(table)


async def _find_forget(config: Config, needle: Any) -> Any:
    from teleton.memory.forget.everywhere import OWNER_SCOPE, find  # deferred: for memory forget only

    history = config.storage.chat_history_file
    async with opened(config) as db:
        return await find(db, config.storage.workspace_dir, needle, OWNER_SCOPE, chat_history=history)


async def _erase_forget(config: Config, findings: Any) -> Any:
    from teleton.memory.forget.everywhere import erase  # deferred: for memory forget only

    async with knowledge_index(config) as (db, index):  # rewritten files are indexed again at once
        history = config.storage.chat_history_file
        return await erase(db, config.storage.workspace_dir, findings, knowledge=index, chat_history=history)


@app.command("forget")
def forget_cmd(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The text to erase everywhere (a phone number, a name …).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Erase without asking first.")] = False,
) -> None:
    """Find a text in every layer of memory (archive, facts, knowledge, logs, sessions …) and erase it."""
    from teleton.memory.forget.everywhere import NeedleError, parse_needle  # deferred: for memory forget only

    # Deferred: the tool families, for memory forget only.
    from teleton.tools.families.forget import describe_findings, describe_report

    config = cli_config(ctx)
    try:
        needle = parse_needle(text)
    except NeedleError as exc:
        raise typer.BadParameter(str(exc), param_hint="TEXT") from None
    if not config.storage.database_file.exists():
        console.print(f"no database yet at {config.storage.database_file}: nothing to forget")
        return
    findings = asyncio.run(_find_forget(config, needle))
    if findings.empty:
        console.print(f"nothing in memory holds {needle.describe()}", highlight=False)
        return
    console.print(describe_findings(findings), highlight=False, markup=False)
    if not yes and not typer.confirm("Erase all of it?", default=False):
        console.print("nothing erased")
        return
    report = asyncio.run(_erase_forget(config, findings))
    console.print(describe_report(report), highlight=False, markup=False)
