"""The database side of forgetting: which rows hold a needle, and erasing them (sync; inside one transaction).

Rows are matched by a Python function registered on the connection (``forget_hit``), so a needle is never
SQL or an FTS query, and matching is the same everywhere (``match``). Archived messages are erased
with ``feed``, which the Telegram layer also uses for ``telegram.deleted_messages: erase``.

Another person's scope (``owner`` False) reads their rows only, and through the scope's own index where
there is one (their DM's messages and session, their label's facts and knowledge), so nobody else's rows are
even looked at: what is found, and how long it takes, is theirs alone (docs/privacy.md, no existence oracle).
Two things are found for them that are not theirs to be told of, and are kept apart: the chunks of the
owner's files their erased lines were in (``chunks``), and the embedding cache, which every label shares.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from teleton.memory.embeddings.cached import text_hash
from teleton.memory.facts.rows import embedding_text as fact_text
from teleton.memory.forget import sessions
from teleton.memory.forget.feed import drop_vectors, erase_messages, feed_hashes, neighbours, optimize, uncache
from teleton.memory.forget.match import Matcher
from teleton.memory.knowledge.rows import embedding_text as chunk_text
from teleton.memory.search.corpora import FACTS, KNOWLEDGE, Corpus
from teleton.privacy import OWNER, Principals
from teleton.storage.sqlite_driver import Connection

FINISHED_TASKS = ("done", "failed", "cancelled")
DECIDED_SENDS = ("denied", "expired", "sent", "failed")
SAMPLES = 20


@dataclass(frozen=True)
class Sample:
    """Some text of a found item, and whose it is: a chat (archive, sessions) or a label (facts, knowledge)."""

    layer: str
    text: str
    chat_id: int | None = None
    label: str | None = None

    def origin(self, principals: Principals) -> str:
        """The item's privacy label."""
        if self.label is not None:
            return self.label
        return principals.chat_label(self.chat_id) if self.chat_id is not None else OWNER


@dataclass
class Rows:
    messages: set[int] = field(default_factory=set)  # tg_messages ids
    neighbours: set[int] = field(default_factory=set)  # later messages whose keyword context held one of them
    users: set[int] = field(default_factory=set)
    chats: set[int] = field(default_factory=set)
    facts: set[int] = field(default_factory=set)
    knowledge: set[int] = field(default_factory=set)
    chunks: set[int] = field(default_factory=set)  # knowledge rows of files whose lines go (whoever's label)
    sessions: set[str] = field(default_factory=set)
    session_messages: set[tuple[int, int]] = field(default_factory=set)  # (chat, message) scrubbed there by id
    session_threads: set[tuple[int, int]] = field(default_factory=set)  # the (chat, forum topic) of those sessions
    records: dict[str, set[int]] = field(default_factory=dict)  # table -> rows scrubbed
    held: dict[str, set[int]] = field(default_factory=dict)  # 'pending_tasks' | 'held_sends' -> rows
    hashes: set[str] = field(default_factory=set)  # embedding-cache keys of every text erased or rewritten
    cached: int = 0  # how many of them are in the cache
    samples: list[Sample] = field(default_factory=list)  # for excerpts

    def counts(self) -> dict[str, int]:
        return {
            "archive": len(self.messages),
            "archive_context": len(self.neighbours),
            "people": len(self.users) + len(self.chats),
            "facts": len(self.facts),
            "knowledge": len(self.knowledge | self.chunks),
            "sessions": len(self.sessions),
            "records": sum(len(ids) for ids in self.records.values()),
            "embedding_cache": self.cached,
            **{name: len(ids) for name, ids in self.held.items()},
        }

    def sample(self, layer: str, text: Any, *, chat_id: int | None = None, label: str | None = None) -> None:
        if len(self.samples) < SAMPLES and isinstance(text, str) and text:
            self.samples.append(Sample(layer, text, chat_id, label))


def find_rows(conn: Connection, matcher: Matcher, owner: bool, user_id: int | None, files: Iterable[str] = ()) -> Rows:
    """Every row the scope may erase that holds the needle (``owner`` everything, else ``user_id``'s), and
    the knowledge chunks of ``files``, workspace files whose lines holding it the scope erases. The cache is
    counted for the owner only (another person's needle may have been embedded from anyone's text)."""
    _register(conn, matcher)
    rows = Rows()
    _find_messages(conn, matcher, rows, owner, user_id)
    _find_sourced_facts(conn, rows, owner, user_id)
    rows.neighbours = neighbours(conn, rows.messages) - rows.messages
    _find_sessions(conn, matcher, rows, owner, user_id)
    if owner:  # another person is not told what other chats' index rows hold
        rows.neighbours |= _context_holders(conn, matcher, rows.messages)
    if matcher.pattern is not None:
        _find_people(conn, rows, owner, user_id)
        _find_facts(conn, rows, owner, user_id)
        _find_knowledge(conn, rows, owner, user_id)
        _find_file_chunks(conn, rows, files)
        _find_records(conn, rows, owner, user_id)
        rows.hashes.add(text_hash(matcher.needle))  # searched for as typed (memory_search, a RAG query)
    rows.hashes |= feed_hashes(conn, rows.messages, rows.neighbours)
    rows.cached = _cached(conn, rows.hashes) if owner else 0
    return rows


def erase_rows(conn: Connection, rows: Rows, matcher: Matcher) -> dict[str, int]:
    """Erase ``rows`` (call with ``secure_delete`` on); return counts per layer."""
    counts = {"vectors": erase_messages(conn, rows.messages, rows.neighbours)}
    counts["archive"] = len(rows.messages)
    counts["archive_context"] = len(rows.neighbours)
    counts["people"] = _clear_people(conn, rows, matcher)
    counts["facts"], vectors = _delete(conn, FACTS, rows.facts)
    counts["vectors"] += vectors
    counts["knowledge"], vectors = _delete(conn, KNOWLEDGE, rows.knowledge | rows.chunks)
    counts["vectors"] += vectors
    for session_id in rows.sessions:
        sessions.scrub(conn, session_id, matcher, rows.session_messages)
    counts["sessions"] = len(rows.sessions)
    counts["records"] = _scrub_records(conn, rows.records, matcher)
    counts["embedding_cache"] = uncache(conn, rows.hashes)
    if any(counts.values()):
        optimize(conn)
    return counts


def message_row(conn: Connection, chat_id: int, message_id: int, owner: bool, user_id: int | None) -> Any:
    """The archived message a ``/forget`` replied to, if the scope may erase it."""
    scope, args = _message_scope(owner, user_id)
    return conn.execute(
        f"select id, text, date from tg_messages where {scope} chat_id = ? and message_id = ?",
        (*args, chat_id, message_id),
    ).fetchone()


# -- finding -----------------------------------------------------------------------------------------------
_current = threading.local()  # the needle of this thread's search: each connection has one thread


def _hit(text: Any) -> bool:
    return bool(_current.matcher.hit(text))


def _json_hit(raw: Any) -> bool:
    return bool(_current.matcher.json_hit(raw))


def _register(conn: Connection, matcher: Matcher) -> None:
    # The functions are registered once per connection and read the thread's needle: SQLite refuses to
    # redefine a function while any statement of the connection is still open.
    _current.matcher = matcher
    for name, fn in (("forget_hit", _hit), ("forget_json", _json_hit)):
        with contextlib.suppress(Exception):  # already registered on this connection
            conn.create_function(name, 1, fn, deterministic=True)


def _message_scope(owner: bool, user_id: int | None) -> tuple[str, list[Any]]:
    """A condition to put first in a ``where`` (it ends with ``and``): the owner's scope has none.

    Another person's is their DM with the agent, both sides (label ``user:<id>``). What they said in a group
    is the group's (label ``chat:<id>``): its rows, and the later messages whose context holds them, are not
    theirs to count, so a group's rows never shape their answer; the owner forgets them."""
    return ("", []) if owner else ("chat_id = ? and", [user_id])


def _find_messages(conn: Connection, matcher: Matcher, rows: Rows, owner: bool, user_id: int | None) -> None:
    scope, args = _message_scope(owner, user_id)
    if matcher.message_id is not None:
        found = conn.execute(
            f"select id, chat_id, text from tg_messages where {scope} id = ?", (*args, matcher.message_id)
        )
    else:
        # By what a message says, not by who sent it: "/forget Olga" must not erase everything Olga wrote.
        found = conn.execute(
            f"select id, chat_id, text from tg_messages where {scope} (forget_hit(text) or forget_hit(fwd_from))",
            args,
        )
    for row in found:
        rows.messages.add(int(row[0]))
        rows.sample("archive", row[2], chat_id=int(row[1]))


def _context_holders(conn: Connection, matcher: Matcher, erased: set[int]) -> set[int]:
    """Messages whose stored keyword context holds the needle (their context predates an edit or a delete)."""
    if matcher.pattern is None:
        return set()
    found = conn.execute("select rowid from tg_messages_fts where forget_hit(context)")
    return {int(r[0]) for r in found} - erased


def _find_people(conn: Connection, rows: Rows, owner: bool, user_id: int | None) -> None:
    scope, args = ("", []) if owner else ("id = ? and", [user_id])  # another person: their own name and number
    for row in conn.execute(
        f"select id from tg_users where {scope} (forget_hit(phone) or forget_hit(first_name) "
        "or forget_hit(last_name) or forget_hit(username))",
        args,
    ):
        rows.users.add(int(row[0]))
    if owner:  # a group's title is the group's, never one person's
        rows.chats |= {int(r[0]) for r in conn.execute("select id from tg_chats where forget_hit(title)")}


def _find_facts(conn: Connection, rows: Rows, owner: bool, user_id: int | None) -> None:
    # Current facts and superseded history rows alike; `subject` may name a person ("other:Ana").
    columns = ["value", "category", "key"] + (["subject"] if "subject" in _columns(conn, "facts") else [])
    hit = " or ".join(f"forget_hit({c})" for c in columns)
    scope, args = ("", []) if owner else ("scope = ? and", [f"user:{user_id}"])
    for row in conn.execute(f"select id, category, key, value, scope from facts where {scope} ({hit})", args):
        _take_fact(rows, row)


def _find_sourced_facts(conn: Connection, rows: Rows, owner: bool, user_id: int | None) -> None:
    """Facts learned only from messages being erased (``fact_sources``): forgetting what someone said forgets
    what was learned from it, unless another of their messages (not an answer of ours) says it too."""
    if not rows.messages:
        return
    erased = json.dumps(sorted(rows.messages))
    scope, args = ("", []) if owner else ("f.scope = ? and", [f"user:{user_id}"])
    sources = "fact_sources s join tg_messages m on m.chat_id = s.chat_id and m.message_id = s.message_id"
    found = conn.execute(
        f"select f.id, f.category, f.key, f.value, f.scope from facts f where {scope} "
        f"exists (select 1 from {sources} where s.fact_id = f.id and m.id in (select value from json_each(?))) "
        f"and not exists (select 1 from {sources} where s.fact_id = f.id and m.is_outgoing = 0 "
        "and m.id not in (select value from json_each(?)))",
        (*args, erased, erased),
    )
    for row in found:
        _take_fact(rows, row)


def _take_fact(rows: Rows, row: Any) -> None:
    rows.facts.add(int(row["id"]))
    rows.hashes.add(text_hash(fact_text(row["category"], row["key"], row["value"])))  # its embedding, cached
    rows.sample("fact", row["value"], label=row["scope"])


def _find_knowledge(conn: Connection, rows: Rows, owner: bool, user_id: int | None) -> None:
    # Another person's: rows with their label (their DM's session summaries), never a file of the owner's.
    scope, args = ("", []) if owner else ("label = ? and", [f"user:{user_id}"])
    for row in conn.execute(
        f"select id, heading, text, label from knowledge where {scope} (forget_hit(text) or forget_hit(heading))", args
    ):
        rows.knowledge.add(int(row["id"]))
        rows.hashes.add(text_hash(chunk_text(row["heading"], row["text"])))
        rows.sample("knowledge", row["text"], label=row["label"])


def _find_file_chunks(conn: Connection, rows: Rows, files: Iterable[str]) -> None:
    # Chunks of a file whose lines go (a daily log's lines quoted from a person's DM): they follow the file,
    # whoever's label they carry. No sample: the rest of such a chunk may be someone else's; and kept apart
    # from ``knowledge``, since whether another line of the chunk holds the text is not that person's to know.
    found = conn.execute(
        "select id, heading, text from knowledge where source = 'memory' and path in (select value from json_each(?)) "
        "and (forget_hit(text) or forget_hit(heading))",
        (json.dumps(sorted(set(files))),),
    )
    for row in found:
        rows.chunks.add(int(row["id"]))
        rows.hashes.add(text_hash(chunk_text(row["heading"], row["text"])))


def _find_sessions(conn: Connection, matcher: Matcher, rows: Rows, owner: bool, user_id: int | None) -> None:
    rows.session_messages = sessions.archived_keys(conn, rows.messages)
    scope = ("", []) if owner else ("chat_id = ? and", [user_id])
    for row, said in sessions.holding(conn, matcher, scope, rows.session_messages):
        rows.sessions.add(str(row["id"]))
        rows.session_threads.add((int(row["chat_id"]), int(row["topic_id"])))
        rows.hashes |= {text_hash(s) for s in said}  # a user's words were embedded as the turn's query
        rows.sample("session", said[0] if said else row["summary"], chat_id=int(row["chat_id"]))


def _by_status(
    conn: Connection, table: str, match: str, statuses: Sequence[str], scope: str, args: list[Any]
) -> tuple[set[int], set[int]]:
    """Ids of ``table`` rows matching ``match``: those in ``statuses``, and the others."""
    marks = ",".join("?" * len(statuses))
    sql = f"select id from {table} where {scope} ({match}) and status {{}} ({marks})"
    return (
        _ids(conn, sql.format("in"), [*args, *statuses]),
        _ids(conn, sql.format("not in"), [*args, *statuses]),
    )


def _find_records(conn: Connection, rows: Rows, owner: bool, user_id: int | None) -> None:
    """Other tables holding user text: finished ones are scrubbed, open promises only reported."""
    tasks = "forget_hit(description) or forget_json(payload) or forget_hit(result)"
    sends = "forget_json(payload) or forget_hit(preview) or forget_hit(result) or forget_hit(cast(body as text))"
    # Another person's: tasks of their DM that run with their clearance (NULL: the chat's, so theirs), and
    # the sends their DM's turns asked for.
    label = f"user:{user_id}"
    task_scope, task_args = (
        ("", []) if owner else ("chat_id = ? and coalesce(clearance, ?) = ? and", [user_id, label, label])
    )
    send_scope, send_args = ("", []) if owner else ("from_chat_id = ? and", [user_id])
    done, open_ = _by_status(conn, "tasks", tasks, FINISHED_TASKS, task_scope, task_args)
    decided, held = _by_status(conn, "pending_sends", sends, DECIDED_SENDS, send_scope, send_args)
    rows.records = {name: ids for name, ids in (("tasks", done), ("pending_sends", decided)) if ids}
    rows.held = {name: ids for name, ids in (("pending_tasks", open_), ("held_sends", held)) if ids}
    if owner:
        audit = _ids(
            conn, "select id from exec_audit where forget_hit(command) or forget_hit(stdout) or forget_hit(stderr)", []
        )
        if audit:
            rows.records["exec_audit"] = audit


def _ids(conn: Connection, sql: str, args: list[Any]) -> set[int]:
    return {int(r[0]) for r in conn.execute(sql, args)}


def _columns(conn: Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"pragma table_info({table})")}


def _cached(conn: Connection, hashes: set[str]) -> int:
    if not hashes:
        return 0
    row = conn.execute(
        "select count(*) from embedding_cache where hash in (select value from json_each(?))",
        (json.dumps(sorted(hashes)),),
    ).fetchone()
    return int(row[0])


# -- erasing -----------------------------------------------------------------------------------------------
def _clear_people(conn: Connection, rows: Rows, matcher: Matcher) -> int:
    """Only the fields that hold it: a phone number goes, the name it was filed under stays."""
    for user_id in rows.users:
        row = conn.execute(
            "select phone, first_name, last_name, username from tg_users where id = ?", (user_id,)
        ).fetchone()
        if row is None:
            continue
        conn.execute(
            "update tg_users set phone = ?, first_name = ?, last_name = ?, username = ? where id = ?",
            (
                None if matcher.hit(row["phone"]) else row["phone"],
                "" if matcher.hit(row["first_name"]) else row["first_name"],
                "" if matcher.hit(row["last_name"]) else row["last_name"],
                None if matcher.hit(row["username"]) else row["username"],
                user_id,
            ),
        )
    conn.executemany("update tg_chats set title = '' where id = ?", [(chat_id,) for chat_id in rows.chats])
    return len(rows.users) + len(rows.chats)


def _delete(conn: Connection, corpus: Corpus, ids: set[int]) -> tuple[int, int]:
    """Delete rows of a corpus (keyword rows go by trigger) and their vectors; (rows, vectors)."""
    if not ids:
        return 0, 0
    vectors = drop_vectors(conn, corpus, ids)
    deleted = conn.execute(
        f"delete from {corpus.table} where id in (select value from json_each(?))", (json.dumps(sorted(ids)),)
    ).rowcount
    return int(deleted), vectors


_SCRUB = {
    "tasks": (("description", False), ("payload", True), ("result", False)),
    "pending_sends": (("payload", True), ("preview", False), ("result", False), ("body", False)),
    "exec_audit": (("command", False), ("stdout", False), ("stderr", False)),
}


def _scrub_records(conn: Connection, records: dict[str, set[int]], matcher: Matcher) -> int:
    total = 0
    for table, ids in records.items():
        columns = _SCRUB[table]
        for row_id in ids:
            row = conn.execute(
                f"select {', '.join(c for c, _ in columns)} from {table} where id = ?", (row_id,)
            ).fetchone()
            if row is None:
                continue
            values = [_scrubbed(row[c], matcher, is_json) for c, is_json in columns]
            sets = ", ".join(f"{c} = ?" for c, _ in columns)
            conn.execute(f"update {table} set {sets} where id = ?", (*values, row_id))
            total += 1
    return total


def _scrubbed(value: Any, matcher: Matcher, is_json: bool) -> Any:
    if isinstance(value, bytes):  # a held item's body: what would have left, text or a file's bytes
        text = value.decode("utf-8", errors="surrogateescape")
        return _scrubbed(text, matcher, is_json).encode("utf-8", errors="surrogateescape")
    if not isinstance(value, str):
        return value
    return (matcher.json_sub(value) if is_json else matcher.sub(value))[0]
