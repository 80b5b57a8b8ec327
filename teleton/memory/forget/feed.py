"""Erasing archived messages: the row, its keyword row, the keyword context of the messages after it, its
vectors, its cached embeddings (sync; inside the caller's transaction).

A message's text also lives in the ``context`` column of the next messages of its chat (see
``feed.embedding``) and in their vectors, which embed it as context. So erasing a message rebuilds those
neighbours' keyword rows from what is left, drops their vectors and marks them for embedding again (the
feed embedder re-embeds them without it), and drops the cached vectors of every text that held it.

``forget_deleted`` is what ``telegram.deleted_messages: erase`` does with a message deleted in Telegram.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from teleton.memory.embeddings.cached import text_hash
from teleton.memory.feed.embedding import FeedMessage, context_text, index_text, load_context, message_line
from teleton.memory.search.corpora import FEED, Corpus, chat_token
from teleton.memory.search.vector_leg import vector_available
from teleton.storage.feed_context import FEED_CONTEXT_MESSAGES, FEED_CONTEXT_SECONDS
from teleton.storage.sqlite_driver import Connection

FTS_TABLES = ("tg_messages_fts", "facts_fts", "knowledge_fts")
_FOLLOWERS_MAX = 50  # rows after one message looked at for its neighbours (a burst within one second)
_COLUMNS = "id, chat_id, sender_name, text, date, media_kind, deleted, is_service"


def forget_deleted(conn: Connection, chat_id: int | None, message_ids: Sequence[int]) -> int:
    """Erase messages deleted in Telegram (same matching as ``feed_archive.mark_deleted``); return how many.

    ``secure_delete`` is on for this transaction's deletes and the feed's keyword index removes their
    entries in place (FTS5 ``secure-delete``) rather than merging the whole index for each deletion."""
    ids = _deleted_rows(conn, chat_id, message_ids)
    if not ids:
        return 0
    conn.execute("pragma secure_delete = on").fetchall()  # it answers with a row: read it, or it stays open
    in_place = _fts_secure_delete(conn, True)
    try:
        followers = neighbours(conn, ids) - ids
        hashes = feed_hashes(conn, ids, followers)
        erase_messages(conn, ids, followers)
        uncache(conn, hashes)
    finally:
        if in_place:
            _fts_secure_delete(conn, False)
        conn.execute("pragma secure_delete = off").fetchall()
    return len(ids)


def _fts_secure_delete(conn: Connection, on: bool) -> bool:
    """Switch FTS5's in-place deletes for the feed's index; False where this SQLite has none (before 3.42):
    the deletes then leave markers until the index merges, rather than failing the archive's batch."""
    try:
        conn.execute("insert into tg_messages_fts(tg_messages_fts, rank) values ('secure-delete', ?)", (int(on),))
    except Exception:
        return False
    return True


def erase_messages(conn: Connection, ids: Iterable[int], also: Iterable[int] = ()) -> int:
    """Delete messages ``ids`` and their vectors, rebuild their neighbours' keyword rows (and ``also``'s);
    return how many vector rows went."""
    ids = set(ids)
    if not ids:
        return 0
    rebuild = (neighbours(conn, ids) | set(also)) - ids
    marks = json.dumps(sorted(ids))
    conn.execute(
        "delete from quarantine where kind = 'embedding' and item_id in (select value from json_each(?))", (marks,)
    )
    conn.execute("delete from tg_messages where id in (select value from json_each(?))", (marks,))
    vectors = drop_vectors(conn, FEED, ids | rebuild)
    for message in _messages(conn, rebuild):
        _rebuild_keyword_row(conn, message)
    # Their vectors embedded the erased text as context: embedded again from what is left.
    conn.execute(
        "update tg_messages set embedded = 0 where embedded = 1 and id in (select value from json_each(?))",
        (json.dumps(sorted(rebuild)),),
    )
    return vectors


def neighbours(conn: Connection, ids: Iterable[int]) -> set[int]:
    """Messages whose keyword context or vector may hold the text of one of ``ids``: the rows after each in
    its chat, up to the first ``FEED_CONTEXT_MESSAGES`` that would have pushed it out of their context."""
    out: set[int] = set()
    for message in _messages(conn, ids):
        followers = conn.execute(
            f"select {_COLUMNS} from tg_messages where chat_id = ? and id != ? and date >= ? and date <= ? "
            # A service row without a keyword row (a slash command or its reply, archive.mark_service) holds
            # no context and no vector: nothing of the text to rebuild.
            "and (is_service = 0 or exists (select 1 from tg_messages_fts f where f.rowid = tg_messages.id)) "
            "order by date, id limit ?",
            (message.chat_id, message.id, message.date, message.date + FEED_CONTEXT_SECONDS, _FOLLOWERS_MAX),
        ).fetchall()
        later = 0
        for row in followers:
            if later >= FEED_CONTEXT_MESSAGES:
                break
            out.add(int(row["id"]))
            # Rows of the same second may sort either way; deleted and service rows never count as context.
            if float(row["date"]) > message.date and not row["deleted"] and not row["is_service"]:
                later += 1
    return out


def feed_hashes(conn: Connection, erased: Iterable[int], rebuilt: Iterable[int] = ()) -> set[str]:
    """Embedding-cache keys of everything embedded from these messages: each text with its context (as it is,
    and as it was while the erased messages were still in it), each line alone, each text (a query)."""
    gone = _messages(conn, erased)
    hashes: set[str] = set()
    for message in gone + _messages(conn, set(rebuilt) - set(erased)):
        plain = load_context(conn, message)
        hashes |= {text_hash(index_text(message, plain)), text_hash(index_text(message, _with(plain, message, gone)))}
        hashes |= {text_hash(message_line(message)), text_hash(message.text)}
    return hashes


def optimize(conn: Connection) -> None:
    """Merge each keyword index into one segment: a deleted row's terms leave the index pages, not only a
    delete marker beside them (what ``secure_delete`` then zeroes)."""
    for table in FTS_TABLES:
        conn.execute(f"insert into {table}({table}) values ('optimize')")


def _deleted_rows(conn: Connection, chat_id: int | None, message_ids: Sequence[int]) -> set[int]:
    ids = json.dumps([int(i) for i in message_ids])
    if chat_id is None:  # a DM or basic-group deletion: any chat that is not a channel (see mark_deleted)
        sql = "select id from tg_messages where chat_id > ? and message_id in (select value from json_each(?))"
        return {int(r[0]) for r in conn.execute(sql, (-(10**12), ids))}
    sql = "select id from tg_messages where chat_id = ? and message_id in (select value from json_each(?))"
    return {int(r[0]) for r in conn.execute(sql, (chat_id, ids))}


def _messages(conn: Connection, ids: Iterable[int]) -> list[FeedMessage]:
    rows = conn.execute(
        f"select {_COLUMNS} from tg_messages where id in (select value from json_each(?)) order by id",
        (json.dumps(sorted(set(ids))),),
    ).fetchall()
    return [
        FeedMessage(
            int(r["id"]),
            int(r["chat_id"]),
            str(r["sender_name"] or ""),
            str(r["text"] or ""),
            float(r["date"]),
            r["media_kind"],
        )
        for r in rows
    ]


def _with(context: list[FeedMessage], message: FeedMessage, erased: list[FeedMessage]) -> list[FeedMessage]:
    """``context`` as it was before some of ``erased`` were marked deleted."""
    earlier = [
        m
        for m in erased
        if m.chat_id == message.chat_id
        and m.id != message.id
        and message.date - FEED_CONTEXT_SECONDS <= m.date <= message.date
    ]
    merged = {m.id: m for m in [*context, *earlier]}.values()
    best = sorted(merged, key=lambda m: (m.date, m.id), reverse=True)[:FEED_CONTEXT_MESSAGES]
    return list(reversed(best))


def _rebuild_keyword_row(conn: Connection, message: FeedMessage) -> None:
    conn.execute("delete from tg_messages_fts where rowid = ?", (message.id,))
    conn.execute(
        "insert into tg_messages_fts(rowid, sender_name, text, context, chat) values (?, ?, ?, ?, ?)",
        (
            message.id,
            message.sender_name,
            message.text,
            context_text(load_context(conn, message)),
            chat_token(message.chat_id),
        ),
    )


def uncache(conn: Connection, hashes: set[str]) -> int:
    """Drop the cached vectors of these texts, for every model (a vector can be read back into its text)."""
    if not hashes:
        return 0
    cur = conn.execute(
        "delete from embedding_cache where hash in (select value from json_each(?))", (json.dumps(sorted(hashes)),)
    )
    return int(cur.rowcount)


def drop_vectors(conn: Connection, corpus: Corpus, ids: set[int]) -> int:
    """Delete the vectors of ``ids`` from the corpus's vector table; return how many went."""
    if not ids or not vector_available(conn, corpus):
        return 0
    marks = json.dumps(sorted(ids))
    gone = conn.execute(f"delete from {corpus.vec} where id in (select value from json_each(?))", (marks,)).rowcount
    return max(0, int(gone))
