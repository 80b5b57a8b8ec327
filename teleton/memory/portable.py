"""Memory as one JSON document, to move it to another machine or another Teleton (``teleton memory export``
and ``import``).

The document holds the facts (current and history, with labels, subjects, times and the ids of the messages
they were drawn from), the knowledge entries that do not come from a file (session summaries, learned notes;
with labels), and the workspace's knowledge files (``knowledge.files``) as text. The archive of Telegram
messages is not in it (it is Telegram's to re-download, where its messages keep their ids, and it would be
most of the bytes). Import never overwrites: a fact already known is skipped, a file that exists is
left alone (and reported), and superseded facts keep their chain.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teleton.memory.facts.rows import COLUMNS, fact_hash
from teleton.memory.facts.sources import link, of_facts
from teleton.memory.knowledge.files import is_knowledge, knowledge_files
from teleton.memory.search.corpora import CURRENT
from teleton.privacy import is_label
from teleton.storage.database import Database
from teleton.storage.private_files import Unreadable, read_confined, write_private
from teleton.storage.sqlite_driver import Connection

FORMAT = "teleton-memory"
VERSION = 1
_FACT_FIELDS = ("category", "key", "value", "scope", "subject", "source", "importance", "created_at", "updated_at",
                "valid_from", "valid_until")  # fmt: skip


@dataclass
class ImportCounts:
    facts: int = 0
    history: int = 0
    known: int = 0  # facts already there (same label, subject and text)
    entries: int = 0
    entries_known: int = 0  # entries already there (same source, path, label and text)
    files: int = 0
    files_kept: int = 0  # files that exist here and were left as they are
    refused: int = 0  # items with a malformed label or path


async def export_memory(db: Database, workspace: Path) -> dict[str, Any]:
    def _read(conn: Connection) -> dict[str, Any]:
        rows = conn.execute(f"select {COLUMNS} from facts order by id").fetchall()
        sources = of_facts(conn, [int(r["id"]) for r in rows])
        facts = [
            {"id": r["id"], "superseded_by": r["superseded_by"], **{k: r[k] for k in _FACT_FIELDS},
             "sources": [list(key) for key in sources.get(int(r["id"]), [])]}
            for r in rows
        ]  # fmt: skip
        entries = [
            dict(r)
            for r in conn.execute(
                "select source, path, heading, text, label from knowledge where source != 'memory' order by id"
            )
        ]
        return {"facts": facts, "entries": entries}

    data = await db.read(_read)
    files = await asyncio.to_thread(_memory_files, workspace)
    return {"format": FORMAT, "version": VERSION, "exported_at": time.time(), **data, "files": files}


def _memory_files(workspace: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in knowledge_files(workspace):
        try:
            text, rel = read_confined(workspace, path)
        except (Unreadable, OSError):
            continue  # a link out of the workspace or a binary file is not memory
        files[rel] = text
    return files


async def import_memory(db: Database, workspace: Path, data: dict[str, Any], add_entry: Any) -> ImportCounts:
    """Add ``data`` (an export) to this memory. ``add_entry`` is ``KnowledgeIndex.add_entry`` (it chunks and
    embeds); facts get their vectors from the embedding worker's catch-up (``embedded = 0``)."""
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise ValueError(f"not a Teleton memory export (format {FORMAT} version {VERSION})")
    counts = ImportCounts()
    await db.write(lambda conn: _import_facts(conn, list(data.get("facts") or []), counts))
    for entry in data.get("entries") or []:
        if not is_label(entry.get("label")) or entry.get("source") not in ("session", "learned"):
            counts.refused += 1
            continue
        newest = (await db.fetchone("select coalesce(max(id), 0) from knowledge"))[0]
        ids = await add_entry(entry["text"], entry["source"], entry.get("path") or "", entry.get("heading") or "",
                              label=entry["label"])  # fmt: skip
        if any(row_id > newest for row_id in ids):  # an entry already here keeps its rows (and their ids)
            counts.entries += 1
        else:
            counts.entries_known += 1
    await asyncio.to_thread(_write_files, workspace, dict(data.get("files") or {}), counts)
    return counts


def _write_files(workspace: Path, files: dict[str, Any], counts: ImportCounts) -> None:
    root = workspace.resolve()
    for rel, text in files.items():
        target = (workspace / str(rel)).resolve()  # "../x.md" or a link out of the workspace is refused
        # Only knowledge files: an export that holds SOUL.md or a tool's file never writes the prompt.
        if not is_knowledge(str(rel)) or not target.is_relative_to(root) or target.suffix != ".md":
            counts.refused += 1
        elif target.exists():
            counts.files_kept += 1
        else:
            write_private(target, str(text), stop_at=workspace)
            counts.files += 1


def _import_facts(conn: Connection, facts: list[dict[str, Any]], counts: ImportCounts) -> None:
    new_ids: dict[int, int] = {}
    links: list[tuple[int, int]] = []  # (new id, old id of its successor)
    for fact in facts:
        if not is_label(fact.get("scope")) or not str(fact.get("value") or "").strip():
            counts.refused += 1
            continue
        current = fact.get("valid_until") is None
        digest = fact_hash(fact["value"])
        if _already_here(conn, fact, digest) or (current and _key_taken(conn, fact)):
            counts.known += 1
            continue
        values = {k: fact.get(k) for k in _FACT_FIELDS} | {"subject": fact.get("subject") or "", "hash": digest}
        marks = ", ".join("?" * len(values))
        cur = conn.execute(f"insert into facts({', '.join(values)}) values ({marks})", tuple(values.values()))
        new_ids[int(fact["id"])] = int(cur.lastrowid)
        _link_sources(conn, int(cur.lastrowid), fact.get("sources"))
        if current:
            counts.facts += 1
        else:
            counts.history += 1
            if fact.get("superseded_by") is not None:
                links.append((int(cur.lastrowid), int(fact["superseded_by"])))
    for row_id, successor in links:
        conn.execute("update facts set superseded_by = ? where id = ?", (new_ids.get(successor), row_id))


def _link_sources(conn: Connection, fact_id: int, sources: Any) -> None:
    """The messages the fact was drawn from, as (chat id, message id): live again once the archive is
    re-downloaded here (`teleton feed import`), where the same messages keep the same ids."""
    pairs = [pair for pair in sources if isinstance(pair, list) and len(pair) == 2] if isinstance(sources, list) else []
    for chat_id, message_id in pairs:
        if type(chat_id) is int and type(message_id) is int:  # not a bool, a string or a float a hand put there
            link(conn, fact_id, chat_id, [message_id])


def _already_here(conn: Connection, fact: dict[str, Any], digest: str) -> bool:
    """The same fact, current, or the same history row (same text and the same end)."""
    ended = "valid_until = ?" if fact.get("valid_until") is not None else CURRENT
    args: tuple[Any, ...] = (fact["scope"], fact.get("subject") or "", digest)
    if fact.get("valid_until") is not None:
        args += (fact["valid_until"],)
    row = conn.execute(f"select 1 from facts where scope = ? and subject = ? and hash = ? and {ended}", args)
    return row.fetchone() is not None


def _key_taken(conn: Connection, fact: dict[str, Any]) -> bool:
    """A current fact here holds the same attribute: ours is as current as theirs, so it stays."""
    if not fact.get("key"):
        return False
    row = conn.execute(
        f"select 1 from facts where scope = ? and subject = ? and category = ? and key = ? and {CURRENT}",
        (fact["scope"], fact.get("subject") or "", fact["category"], fact["key"]),
    ).fetchone()
    return row is not None
