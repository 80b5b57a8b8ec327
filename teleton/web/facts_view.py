"""The Facts page's reads and changes: the facts by person and category with what each replaced, a fact edited,
a text forgotten everywhere, and the knowledge files (``knowledge.files``) viewed and edited.

Every change is the operation the chat and the terminal already use, so the dashboard is no second write path: an
edit is ``FactStore.save`` naming the fact it replaces; forgetting is ``teleton memory forget`` (``find``, then,
confirmed, ``find`` again and ``erase``); a file is confined as the workspace tools confine a path
(``workspace_paths.resolve``, then knowledge files only), written 0600 and re-indexed at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import structlog

from teleton.memory.facts.rows import COLUMNS, Fact, StoredFact, stored
from teleton.memory.facts.store import FactStore, predecessors
from teleton.memory.facts.subjects import OWNER_SUBJECT, resolve
from teleton.memory.feed import reads
from teleton.memory.forget.everywhere import OWNER_SCOPE, Needle, NeedleError, erase, find, parse_needle
from teleton.memory.knowledge.files import is_knowledge, knowledge_files
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.search.corpora import CURRENT
from teleton.storage.database import Database
from teleton.storage.private_files import Unreadable, read_confined, write_private
from teleton.storage.sqlite_driver import Connection
from teleton.tools.families import workspace_paths
from teleton.tools.families.forget import describe_findings, describe_report

log = structlog.get_logger(__name__)

FACTS_CAP = 1000  # current facts on one page: beyond it the owner narrows by person


class Refused(ValueError):
    """A change the page does not make; the message says why, in the owner's words."""


@dataclass(frozen=True)
class FactItem:
    fact: StoredFact
    history: list[StoredFact]  # the values it replaced, newest ending first (the oldest last)


@dataclass(frozen=True)
class Category:
    name: str
    items: list[FactItem]


@dataclass(frozen=True)
class Person:
    subject: str  # owner, user:<id>, chat:<id>, other:<name>, '' (not said)
    name: str
    categories: list[Category]


@dataclass(frozen=True)
class FactList:
    people: list[Person]
    total: int  # current facts of the filter, shown or not (the page shows at most FACTS_CAP)
    subjects: list[tuple[str, str, int]]  # (subject, name, current facts): the "about" filter's choices


@dataclass(frozen=True)
class FactsView:
    db: Database
    facts: FactStore
    workspace: Path
    knowledge: KnowledgeIndex | None = None  # the daemon's: what re-indexes an edited or rewritten file
    chat_history: Path | None = None  # `teleton chat`'s input history, which forget scrubs too
    cap: int = FACTS_CAP

    # -- facts ---------------------------------------------------------------------------------------
    async def listing(self, about: str | None = None) -> FactList:
        """The current facts (about one subject: owner, a user id, a name, as `teleton memory facts --subject`),
        grouped by person and category, each with its history."""
        return await self.db.read(lambda conn: _listing(conn, _subject(conn, about), self.cap))

    async def edit(self, fact_id: int, value: str) -> str:
        """A new value for a current fact, saved by the store as superseding it (the old one stays as history)."""
        if not value.strip():
            raise Refused("A fact needs a value; to drop it, forget its text.")
        row = await self.db.fetchone(f"select {COLUMNS} from facts where id = ?", (fact_id,))
        if row is None:
            raise Refused(f"There is no fact #{fact_id}.")
        old = stored(row)
        if not old.current:
            raise Refused(f"Fact #{fact_id} is history (replaced by #{old.superseded_by}): edit the current one.")
        new = Fact(" ".join(value.split()), old.category, old.key, old.scope, old.source, old.importance,
                   old.subject, replaces=old.id)  # fmt: skip  # said_by '': the owner's own word ends any fact
        outcome = await self.facts.save(new)
        log.info("dashboard_fact_edited", fact=fact_id, action=outcome.action, new=outcome.id, scope=old.scope)
        if outcome.action == "superseded":
            return f"Saved as fact #{outcome.id}; it replaces fact #{fact_id}, kept as history."
        if outcome.action == "duplicate":
            return f"Nothing changed: fact #{outcome.id} already says that."
        return f"Saved as fact #{outcome.id}."

    # -- forget --------------------------------------------------------------------------------------
    async def preview(self, text: str) -> tuple[str, bool]:
        """(what `teleton memory forget` shows before asking, whether anything was found)."""
        needle = _needle(text)
        findings = await find(self.db, self.workspace, needle, OWNER_SCOPE, chat_history=self.chat_history)
        log.info("dashboard_forget_previewed", **findings.counts())  # the counts, never the text
        if findings.empty:
            return f"Nothing in memory holds {needle.describe()}.", False
        return describe_findings(findings), True

    async def forget(self, text: str) -> str:
        """Erase ``text`` everywhere, looked up again now, as `teleton memory forget` does once confirmed."""
        needle = _needle(text)
        findings = await find(self.db, self.workspace, needle, OWNER_SCOPE, chat_history=self.chat_history)
        if findings.empty:
            return f"Nothing in memory holds {needle.describe()}."
        history = self.chat_history
        report = await erase(self.db, self.workspace, findings, knowledge=self.knowledge, chat_history=history)
        log.info("dashboard_forgot", wiped=report.wiped, **report.erased)
        return describe_report(report)

    # -- knowledge files -----------------------------------------------------------------------------
    async def files(self) -> list[str]:
        """The knowledge files, as the workspace holds them (a link out of it is not listed)."""
        return await asyncio.to_thread(_memory_files, self.workspace)

    async def read_file(self, given: str) -> tuple[str, str]:
        """(its workspace path, its text) of a knowledge file; a new one reads as empty."""
        rel, real = await asyncio.to_thread(_confined, self.workspace, given)

        def _read() -> str:
            if not real.exists():
                return ""
            return read_confined(self.workspace, real)[0]

        try:
            return rel, await asyncio.to_thread(_read)
        except (Unreadable, OSError) as exc:
            raise Refused(f"{rel} cannot be read as text: {exc}") from None

    async def save_file(self, given: str, text: str) -> tuple[str, str]:
        """Write a knowledge file whole (0600) and re-index, so search finds what it now says: (its workspace
        path, what was done)."""
        rel, real = await asyncio.to_thread(_confined, self.workspace, given)
        body = text.replace("\r\n", "\n")  # a browser's textarea sends CRLF; the workspace's files are LF

        def _write() -> None:
            if real.is_dir():
                raise Refused(f"{rel} is a folder.")
            write_private(real, body, stop_at=self.workspace)

        await asyncio.to_thread(_write)
        said = f"Saved {rel} ({len(body)} characters)"
        if self.knowledge is None:
            said += "; search sees it at the next re-index."
        else:
            try:
                counts = await self.knowledge.reindex()
            except Exception as exc:  # the file is written; the watcher re-indexes it later
                log.warning("dashboard_reindex_failed", path=rel, error=repr(exc))
                said += "; the re-index failed, search catches up later."
            else:
                said += f"; re-indexed: {counts.added} added, {counts.updated} updated, {counts.removed} removed."
        log.info("dashboard_file_saved", path=rel, chars=len(body))
        return rel, said


def _needle(text: str) -> Needle:
    try:
        return parse_needle(text)
    except NeedleError as exc:
        raise Refused(str(exc)) from None


def _listing(conn: Connection, subject: str | None, cap: int) -> FactList:
    where, args = (f"{CURRENT} and subject = ?", (subject,)) if subject is not None else (CURRENT, ())
    total = int(conn.execute(f"select count(*) from facts where {where}", args).fetchone()[0])
    rows = conn.execute(f"select {COLUMNS} from facts where {where} order by subject, category, id limit ?",
                        (*args, cap)).fetchall()  # fmt: skip
    current = [stored(r) for r in rows]
    history = _history_of(current, predecessors(conn, [f.id for f in current]))
    counts = conn.execute(f"select subject, count(*) from facts where {CURRENT} group by subject").fetchall()
    names = _names(conn, [str(r[0]) for r in counts] + [f.subject for f in current])
    people: dict[str, dict[str, list[FactItem]]] = {}
    for fact in current:
        people.setdefault(fact.subject, {}).setdefault(fact.category, []).append(
            FactItem(fact, history.get(fact.id, []))
        )
    shown = [
        Person(s, names[s], [Category(c, items) for c, items in sorted(cats.items())])
        for s, cats in sorted(people.items(), key=lambda p: _order(p[0]))
    ]
    choices = [(str(s), names[str(s)], int(n)) for s, n in sorted(counts, key=lambda r: _order(str(r[0])))]
    return FactList(shown, total, choices)


def _subject(conn: Connection, about: str | None) -> str | None:
    """The subject the filter names: one facts are stored under as given (the page's own choices), else
    read as `teleton memory facts --subject` reads it (owner, a user id, a name)."""
    if not about:
        return None
    if conn.execute("select 1 from facts where subject = ? limit 1", (about,)).fetchone() is not None:
        return about
    return resolve(about, OWNER_SUBJECT, 0, {})


def _history_of(current: list[StoredFact], old: list[StoredFact]) -> dict[int, list[StoredFact]]:
    """Current fact id -> the facts it replaced, through a chain (A replaced by B replaced by C: both under
    C), in ``old``'s order (newest ending first)."""
    now = {f.id for f in current}
    successor = {f.id: f.superseded_by for f in old}
    found: dict[int, list[StoredFact]] = {}
    for fact in old:
        head, seen = fact.superseded_by, {fact.id}
        while head is not None and head not in now and head not in seen:  # `seen`: a loop in bad data ends
            seen.add(head)
            head = successor.get(head)
        if head in now:
            found.setdefault(head, []).append(fact)
    return found


def _order(subject: str) -> tuple[int, str]:
    """The owner first, then people, groups, others, and facts about nobody in particular last."""
    kinds = {"owner": 0, "user": 1, "chat": 2, "other": 3}
    return (kinds.get(subject.split(":")[0], 4), subject)


def _names(conn: Connection, subjects: Iterable[str]) -> dict[str, str]:
    """How the page names each subject: a person's archived name, a group's title, else the subject."""
    names: dict[str, str] = {}
    for subject in set(subjects):
        kind, _, value = subject.partition(":")
        name = {"owner": "you (the owner)", "": "nobody in particular"}.get(subject, subject)
        if kind == "user" and value.lstrip("-").isdigit():
            row = reads.user_name(conn, int(value))
            known = " ".join(str(p) for p in (row[0], row[1]) if p) if row is not None else ""
            name = f"{known} ({subject})" if known else subject
        elif kind == "chat" and value.lstrip("-").isdigit():
            title = reads.chat_titles(conn, [int(value)]).get(int(value), "")
            name = f"{title} ({subject})" if title else subject
        elif kind == "other":
            name = value
        names[subject] = name
    return names


def _memory_files(workspace: Path) -> list[str]:
    listed = []
    for path in knowledge_files(workspace):
        try:
            listed.append(_confined(workspace, path.relative_to(workspace).as_posix())[0])
        except Refused:
            continue  # a link out of the workspace, or to a file that is not knowledge
    return listed


def _confined(workspace: Path, given: str) -> tuple[str, Path]:
    """(workspace path, real path) of a knowledge file (``knowledge.files.is_knowledge``) by its real path (so
    a link from memory/ to SOUL.md or out of the workspace is refused), or ``Refused``."""
    try:
        target = workspace_paths.resolve(workspace, given)
    except workspace_paths.PathRefused as exc:
        raise Refused(str(exc)) from None
    rel = target.rel.as_posix()
    if not is_knowledge(rel):
        raise Refused(f"{given!r} is not a knowledge file: MEMORY.md, or a .md file under memory/ or public/.")
    return rel, target.real
