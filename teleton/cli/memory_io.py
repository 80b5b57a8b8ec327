"""`teleton memory facts | export | import`: what memory holds about whom, and memory moved as one file."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from teleton.cli.context import cli_config, opened
from teleton.cli.memory_cmd import knowledge_index
from teleton.config.schema import Config
from teleton.memory.facts.rows import COLUMNS, stored
from teleton.memory.facts.sources import of_facts
from teleton.memory.facts.subjects import resolve
from teleton.memory.portable import export_memory, import_memory
from teleton.memory.search.corpora import CURRENT
from teleton.storage.private_files import write_private
from teleton.text.counts import counted

console = Console(soft_wrap=True)


async def _facts(config: Config, subject: str | None, history: bool) -> tuple[list[Any], dict[int, Any]]:
    """The facts, and where each came from (fact id -> [(chat id, message id)])."""
    where = "1" if history else CURRENT
    args: tuple[Any, ...] = ()
    if subject:
        where += " and subject = ?"
        args = (resolve(subject, "owner", 0, {}),)
    async with opened(config) as db:
        rows = await db.fetchall(f"select {COLUMNS} from facts where {where} order by scope, subject, id", args)
        found = [stored(r) for r in rows]
        origins = await db.read(lambda conn: of_facts(conn, [f.id for f in found]))
    return found, origins


def facts_cmd(
    ctx: typer.Context,
    subject: Annotated[
        str | None, typer.Option("--subject", help="Only facts about this one: owner, a user id, or a name.")
    ] = None,
    history: Annotated[bool, typer.Option("--history", help="Also the facts that were replaced.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the facts memory holds, with whom each is about and who may read it (and, as JSON, the archived
    messages each was drawn from)."""
    found, origins = asyncio.run(_facts(cli_config(ctx), subject, history))
    if as_json:
        keys = ("id", "category", "key", "value", "scope", "subject", "importance", "valid_from", "valid_until",
                "superseded_by")  # fmt: skip
        shown = []
        for f in found:
            sources = [{"chat_id": c, "message_id": m} for c, m in origins.get(f.id, [])]
            shown.append({**{k: getattr(f, k) for k in keys}, "sources": sources})
        json.dump(shown, sys.stdout, indent=2)
        print()
        return
    if not found:
        console.print("no facts" + (f" about {subject}" if subject else ""))
        return
    table = Table("id", "about", "readable by", "fact")
    for f in found:
        # Text: "[preference/food] …" is the fact's own words, never rich markup (which would eat the label).
        table.add_row(str(f.id), Text(f.subject or "-"), f.scope, Text(f.line()))
    console.print(table)


async def _export(config: Config) -> dict[str, Any]:
    async with opened(config) as db:
        return await export_memory(db, config.storage.workspace_dir)


def export_cmd(
    ctx: typer.Context,
    path: Annotated[Path | None, typer.Argument(help="Where to write the JSON (default: standard output).")] = None,
) -> None:
    """Write facts, knowledge entries and memory files as one JSON document (private: mode 0600)."""
    data = asyncio.run(_export(cli_config(ctx)))
    text = json.dumps(data, indent=1, ensure_ascii=False)
    if path is None:
        print(text)
        return
    write_private(path, text + "\n")
    console.print(f"exported {counted(len(data['facts']), 'fact')}, {counted(len(data['entries']), 'entry')} and "
                  f"{counted(len(data['files']), 'file')} to {path}", highlight=False)  # fmt: skip


async def _import(config: Config, data: dict[str, Any]) -> Any:
    async with knowledge_index(config) as (db, index):
        counts = await import_memory(db, config.storage.workspace_dir, data, index.add_entry)
        await index.reindex()  # the files just written
        return counts


def import_cmd(
    ctx: typer.Context, path: Annotated[Path, typer.Argument(help="A file written by `teleton memory export`.")]
) -> None:
    """Add an export to this memory: nothing here is overwritten."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        console.print(f"[red]error:[/] cannot read {path}: {exc}")
        raise typer.Exit(1) from None
    try:
        counts = asyncio.run(_import(cli_config(ctx), data if isinstance(data, dict) else {}))
    except ValueError as exc:
        console.print(f"[red]error:[/] {path}: {exc}")
        raise typer.Exit(1) from None
    console.print(describe_import(counts), highlight=False)


def describe_import(counts: Any) -> str:
    """What an import added, and what it found already here: ``nothing new: 5 already known`` on a re-import."""
    new = [
        counted(counts.facts, "fact") + (f" ({counts.history} replaced)" if counts.history else ""),
        counted(counts.entries, "entry"),
        counted(counts.files, "file"),
    ]
    known = [counted(counts.known, "fact"), counted(counts.entries_known, "entry"), counted(counts.files_kept, "file")]
    already = counts.known + counts.entries_known + counts.files_kept
    refused = f"; refused: {counts.refused} (a bad label or path)" if counts.refused else ""
    if counts.facts + counts.history + counts.entries + counts.files == 0:
        return f"nothing new: {already} already known ({', '.join(known)}){refused}"
    return f"imported {', '.join(new)}; already here: {', '.join(known)}{refused}"


def register(app: typer.Typer) -> None:
    app.command("facts")(facts_cmd)
    app.command("export")(export_cmd)
    app.command("import")(import_cmd)
