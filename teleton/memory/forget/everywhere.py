"""Forget everywhere: find every copy of a text (or of one archived message) in memory, then erase it.

``find`` looks in every layer a clearance may erase; ``erase`` removes the bytes rather than marking them,
with ``secure_delete`` on, the touched keyword indexes merged and the WAL truncated, then (for the owner) reads
the file back and vacuums when an old copy sits in free space. A pending task or held send is only reported:
it is a promise to deliver. Who may forget what (``scope_for``), and what another person is told: docs/memory.md,
"Forgetting" and "Forgetting for someone else". No Telethon and no model SDK here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from teleton.memory.forget import chat_history as forget_history
from teleton.memory.forget import files as forget_files
from teleton.memory.forget import rows as forget_rows
from teleton.memory.forget.match import MIN_CHARS, Matcher, NeedleError, compile_needle
from teleton.memory.search.bit_index import index_for
from teleton.memory.search.corpora import FEED
from teleton.privacy import Clearance
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)

__all__ = [
    "MIN_CHARS",
    "OWNER_SCOPE",
    "Findings",
    "ForgetScope",
    "Needle",
    "NeedleError",
    "Report",
    "erase",
    "find",
    "parse_needle",
    "scope_for",
]

# The order layers are reported in; each counts rows, except files and daily logs (lines).
LAYERS = (
    "archive",
    "archive_context",
    "people",
    "facts",
    "knowledge",
    "files",
    "daily_logs",
    "chat_history",
    "sessions",
    "records",
    "vectors",
    "embedding_cache",
)
HELD = ("pending_tasks", "held_sends")  # reported, never changed (see the module docstring)
# Counts that are not a function of the scope's own rows: vectors and the embedding cache are shared by every
# label (a text embedded from the owner's turn has the same key as the same text of another person's).
SHARED = ("vectors", "embedding_cache")
EXCERPTS = 5
EXCERPT_CHARS = 30  # on each side of a match


@dataclass(frozen=True)
class Needle:
    """What to forget: a text, or one archived message (a ``/forget`` sent as a reply)."""

    text: str = ""
    message: tuple[int, int] | None = None  # (chat_id, message_id)

    def describe(self) -> str:
        # Never the text itself: the reply that shows it would be archived, a new copy of it.
        return "the message you replied to" if self.message else f"“{self.text[:2]}…” ({len(self.text)} characters)"


def parse_needle(text: str) -> Needle:
    """A text needle, refused when it is empty or so short it would match nearly everything."""
    compile_needle(text)  # raises NeedleError with the reason
    return Needle(text=" ".join(text.split()))


@dataclass(frozen=True)
class ForgetScope:
    """Whose items may be erased: the owner's scope reaches everything, a user's only their own."""

    owner: bool = False
    user_id: int | None = None

    @property
    def label(self) -> str:
        return "owner" if self.owner else f"user:{self.user_id}"


OWNER_SCOPE = ForgetScope(owner=True)


def scope_for(clearance: Clearance) -> ForgetScope | None:
    """The forget scope of a turn: the owner's clearance everything, a DM's its person; a group None."""
    if clearance.is_owner:
        return OWNER_SCOPE
    kind, _, value = clearance.label.partition(":")
    return ForgetScope(user_id=int(value)) if kind == "user" else None


@dataclass
class Findings:
    needle: Needle
    scope: ForgetScope
    rows: forget_rows.Rows = field(default_factory=forget_rows.Rows)
    files: dict[str, int] = field(default_factory=dict)  # workspace path -> matching lines (not daily logs)
    daily_logs: dict[str, int] = field(default_factory=dict)
    chat_history: int = 0  # entries of `teleton chat`'s input history (the owner's scope only)
    excerpts: list[forget_rows.Sample] = field(default_factory=list)  # their text masked

    def counts(self) -> dict[str, int]:
        counts = own_counts(self.rows.counts(), self.rows, self.scope)
        counts["files"] = sum(self.files.values())
        counts["daily_logs"] = sum(self.daily_logs.values())
        counts["chat_history"] = self.chat_history
        return {layer: counts[layer] for layer in LAYERS + HELD if counts.get(layer)}

    @property
    def empty(self) -> bool:
        return not any(n for layer, n in self.counts().items() if layer not in HELD)


@dataclass
class Report:
    erased: dict[str, int]
    held: dict[str, int]  # left alone: promises to deliver (see HELD)
    copies: tuple[str, ...]  # places outside the database that may still hold it
    wiped: bool | None  # the database file holds no copy (checked byte by byte); None: not checked


def own_counts(counts: dict[str, int], rows: forget_rows.Rows, scope: ForgetScope) -> dict[str, int]:
    """What ``scope`` is told of ``counts`` (found or erased per layer): the owner all of it, another person
    only the layers made of their own rows, knowledge their label's rows alone (see ``SHARED``)."""
    if scope.owner:
        return counts
    own = {layer: n for layer, n in counts.items() if layer not in SHARED}
    own["knowledge"] = len(rows.knowledge)
    return own


async def find(
    db: Database, workspace: Path, needle: Needle, scope: ForgetScope, *, chat_history: Path | None = None
) -> Findings:
    """Every item ``scope`` may erase that holds ``needle``, per layer, with a few masked excerpts.
    ``chat_history``: the input history of `teleton chat`, looked in for the owner's scope (what the owner
    typed is nobody else's to erase)."""
    matcher = await _matcher(db, needle, scope)
    findings = Findings(needle, scope)
    if matcher is None:
        return findings
    files = await asyncio.to_thread(forget_files.scan, workspace, matcher, scope.owner, scope.user_id)
    # Another person's lines are in the owner's files: those files' chunks are rebuilt when erasing, but
    # never looked at to answer them.
    chunked = list(files) if scope.owner else []
    findings.rows = await db.read(
        lambda conn: forget_rows.find_rows(conn, matcher, scope.owner, scope.user_id, files=chunked)
    )
    findings.files = {path: n for path, n in files.items() if not forget_files.is_daily_log(path)}
    findings.daily_logs = {path: n for path, n in files.items() if forget_files.is_daily_log(path)}
    if chat_history is not None and scope.owner:
        findings.chat_history = await asyncio.to_thread(forget_history.scan, chat_history, matcher)
    findings.excerpts = _excerpts(findings, matcher)
    return findings


async def erase(
    db: Database, workspace: Path, findings: Findings, *, knowledge: Any = None, chat_history: Path | None = None
) -> Report:
    """Erase what ``findings`` holds, looked up again now (what changed since is included). ``knowledge`` (a
    KnowledgeIndex) re-indexes the rewritten files at once, so the rest of their text stays searchable;
    without it the next re-index does. ``chat_history`` as for ``find``; without it the report names that
    file among the copies not touched."""
    scope = findings.scope
    matcher = await _matcher(db, findings.needle, scope)
    erased: dict[str, int] = dict.fromkeys(LAYERS, 0)
    held: dict[str, int] = {}
    if matcher is not None:
        lines = await asyncio.to_thread(forget_files.rewrite, workspace, matcher, scope.owner, scope.user_id)
        for path, n in lines.items():
            erased["daily_logs" if forget_files.is_daily_log(path) else "files"] += n
        if chat_history is not None and scope.owner:
            erased["chat_history"] = await asyncio.to_thread(forget_history.rewrite, chat_history, matcher)
        counts, held, rows = await _erase_rows(db, findings, matcher, list(lines))
        for layer, n in own_counts(counts, rows, scope).items():
            erased[layer] += n
        if lines and knowledge is not None:
            await _reindex(knowledge)
    if scope.owner:
        wiped = await _wipe(db, matcher)
    else:
        # Whether anyone else's rows or free pages hold the same bytes is not this person's to learn, from
        # the answer or from how long it takes: the file is not read back (nor vacuumed) for them.
        await db.checkpoint()
        wiped = None
    erased = {layer: n for layer, n in erased.items() if n}
    log.info("memory_forgotten", scope=scope.label, wiped=wiped, **erased)
    return Report(erased, held, copies_left(scope, chat_history), wiped)


# Where else the data may still be: nothing outside the database, the workspace and (from the terminal) the
# chat history is touched.
COPIES = (
    "copies made with `teleton backup` (not touched: after restoring one, forget again)",
    "Telegram itself: the chats still hold the messages (a `teleton feed backfill` would archive them again)",
    "the Telegram session file (Telethon's own cache of people, phone numbers included)",
)
LOGS = (
    "log files, where an error quoted it (chat.log in the data directory, `logging.file`, the journal): "
    "delete them, e.g. `rm ~/.teleton/chat.log`"
)
HISTORY = (
    "what was typed in `teleton chat` (its input history, chat_history in the data directory): "
    "`teleton memory forget` in a terminal scrubs it too"
)


def copies_left(scope: ForgetScope, chat_history: Path | None) -> tuple[str, ...]:
    """The places not touched that may still hold the text: the owner is also told of the logs, and of the
    chat history when it was not scrubbed here (a /forget sent on Telegram)."""
    if not scope.owner:
        return COPIES
    return COPIES + (LOGS,) + (() if chat_history is not None else (HISTORY,))


async def _matcher(db: Database, needle: Needle, scope: ForgetScope) -> Matcher | None:
    """The matcher of a needle; a message needle resolves to its row (None: not there or not erasable)."""
    if needle.message is None:
        return compile_needle(needle.text)
    chat_id, message_id = needle.message
    row = await db.read(lambda conn: forget_rows.message_row(conn, chat_id, message_id, scope.owner, scope.user_id))
    if row is None:
        return None
    return Matcher.for_message(int(row["id"]), str(row["text"] or ""), float(row["date"]))


async def _erase_rows(
    db: Database, findings: Findings, matcher: Matcher, files: list[str]
) -> tuple[dict[str, int], dict[str, int], forget_rows.Rows]:
    """(erased per layer, held per layer, the rows erased). ``secure_delete`` zeroes what the deletes free;
    it is on in a transaction of its own around the erase and then off, so the daemon's other writes keep
    their speed."""
    await db.write(lambda conn: _secure_delete(conn, True))
    try:

        def _erase(conn: Connection) -> tuple[dict[str, int], dict[str, int], forget_rows.Rows]:
            scope = findings.scope
            rows = forget_rows.find_rows(conn, matcher, scope.owner, scope.user_id, files=files)
            rows.hashes |= findings.rows.hashes  # texts that changed since they were found (a file re-indexed)
            held = {layer: n for layer, n in rows.counts().items() if layer in HELD and n}
            return forget_rows.erase_rows(conn, rows, matcher), held, rows

        counts, held, rows = await db.write(_erase)
    finally:
        await db.write(lambda conn: _secure_delete(conn, False))
    if counts.get("archive") and db.vectors:
        # The in-memory index already skips rows gone from the float16 table; rebuilt, it holds no copy either.
        await db.read(lambda conn: index_for(conn, FEED).invalidate())
    return counts, held, rows


def _secure_delete(conn: Connection, on: bool) -> None:
    conn.execute(f"pragma secure_delete = {'on' if on else 'off'}").fetchall()


async def _reindex(knowledge: Any) -> None:
    try:
        await knowledge.reindex()
    except Exception as exc:  # the lines are gone from the files; search catches up on the next re-index
        log.warning("forget_reindex_failed", error=repr(exc))


async def _wipe(db: Database, matcher: Matcher | None) -> bool | None:
    """Truncate the WAL; if the file still holds the text in free space, vacuum. Whether the file is clean
    (None: not checked, because rows this scope may not erase, or held ones, still hold the text)."""
    await db.checkpoint()
    if matcher is None or matcher.raw is None:
        return True
    left = await db.read(lambda conn: forget_rows.find_rows(conn, matcher, True, None))
    if any(left.counts().values()):
        return None
    if not await asyncio.to_thread(matcher.in_file, db.path):
        return True
    log.info("forget_vacuum", reason="old copies in free pages")
    try:
        await db.vacuum()
    except Exception as exc:  # another process is reading (the CLI while the daemon runs): reported
        log.warning("forget_vacuum_failed", error=repr(exc))
    await db.checkpoint()
    return not await asyncio.to_thread(matcher.in_file, db.path)


def _excerpts(findings: Findings, matcher: Matcher) -> list[forget_rows.Sample]:
    """Short excerpts with the match itself masked, so the reply that shows them holds no new copy."""
    out = []
    for sample in findings.rows.samples:
        excerpt = mask(sample.text, matcher)
        if excerpt:
            out.append(replace(sample, text=excerpt))
        if len(out) >= EXCERPTS:
            break
    return out


def mask(text: str, matcher: Matcher, around: int = EXCERPT_CHARS) -> str:
    """``…words before ░░░ words after…`` around the first match of ``text`` ("" when none)."""
    flat = " ".join(text.split())
    if matcher.pattern is None:  # a message forgotten by reply: nothing of it is repeated
        return f"░░░ ({len(flat)} characters)"
    hit = matcher.search(flat)
    if hit is None:
        return ""
    start, end = hit
    lead = "…" if start > around else ""
    tail = "…" if end + around < len(flat) else ""
    excerpt, _ = matcher.sub(flat[max(0, start - around) : end + around], "░░░")
    return f"{lead}{excerpt}{tail}"
