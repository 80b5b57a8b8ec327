"""What a Telegram message looks like to the feed's indexes, and the background worker that embeds it.

A message alone is often unsearchable ("yes, the one by the lake!"), so it is indexed with the earlier
messages of its chat: in the text it is embedded as (``index_text``) and in a low-weight keyword column.
Embedding never runs on the receive path, and a text the embedder rejects is quarantined without holding up
the rest (docs/memory.md, "The feed's records").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import structlog

from teleton.memory.embeddings.cached import text_hash
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.search import vector_store
from teleton.memory.search.bit_index import index_for
from teleton.memory.search.corpora import FEED, chat_token
from teleton.memory.search.vector_store import check_model, write_vectors
from teleton.process.supervisor import Supervisor
from teleton.storage import quarantine
from teleton.storage.database import Database
from teleton.storage.feed_context import FEED_CONTEXT_CHARS, FEED_CONTEXT_MESSAGES, FEED_CONTEXT_SECONDS
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class FeedMessage:
    id: int
    chat_id: int
    sender_name: str
    text: str
    date: float
    media_kind: str | None = None


def message_line(message: FeedMessage) -> str:
    body = message.text.strip() or (f"[{message.media_kind}]" if message.media_kind else "")
    return f"{message.sender_name}: {body}" if message.sender_name else body


def index_text(message: FeedMessage, context: Sequence[FeedMessage]) -> str:
    """The text embedded for ``message``: its context (oldest first), then the message itself."""
    return "\n".join([*(message_line(m) for m in context), message_line(message)])


def context_text(context: Sequence[FeedMessage]) -> str:
    """The keyword ``context`` column: the plain text of the context messages."""
    return " ".join(m.text[:FEED_CONTEXT_CHARS] for m in context if m.text)


def is_indexable(message: FeedMessage) -> bool:
    return bool(message.text.strip())


_COLUMNS = "id, chat_id, sender_name, text, date, media_kind"


def _message(row: Any) -> FeedMessage:
    return FeedMessage(
        id=int(row[0]),
        chat_id=int(row[1]),
        sender_name=str(row[2] or ""),
        text=str(row[3] or ""),
        date=float(row[4]),
        media_kind=row[5],
    )


def load_context(conn: Connection, message: FeedMessage) -> list[FeedMessage]:
    """The context messages of ``message`` (oldest first), by the same rule as the schema's trigger."""
    rows = conn.execute(
        f"select {_COLUMNS} from tg_messages "
        "where chat_id = ? and id != ? and deleted = 0 and is_service = 0 and date <= ? and date >= ? "
        "order by date desc, id desc limit ?",
        (message.chat_id, message.id, message.date, message.date - FEED_CONTEXT_SECONDS, FEED_CONTEXT_MESSAGES),
    ).fetchall()
    return [_message(row) for row in reversed(rows)]


@dataclass
class PendingBatch:
    messages: list[FeedMessage]
    contexts: list[list[FeedMessage]]


def read_pending(conn: Connection, limit: int) -> PendingBatch:
    rows = conn.execute(
        f"select {_COLUMNS} from tg_messages where embedded = 0 order by id limit ?", (limit,)
    ).fetchall()
    messages = [_message(row) for row in rows]
    return PendingBatch(messages, [load_context(conn, m) for m in messages])


CODE_BATCH = 5_000  # vectors coded per write transaction by ``fill_codes`` (~0.1 s of the writer each)
QUARANTINED = -1  # tg_messages.embedded of a row whose text the embedder rejects


def store_batch(
    conn: Connection,
    batch: PendingBatch,
    vectors: Sequence[np.ndarray | None] | np.ndarray | None,
    model: tuple[str, int],
    rejected: dict[int, str] | None = None,
) -> int:
    """Write vectors and refreshed keyword context; skip rows edited meanwhile (they stay pending).
    ``rejected`` (row id -> error) are quarantined: keyword-searchable, never embedded."""
    check_model(conn, *model)
    stored = 0
    vector_rows = []
    for message_id, error in (rejected or {}).items():
        quarantine.put(conn, "embedding", message_id, error)
        conn.execute("update tg_messages set embedded = ? where id = ? and embedded = 0", (QUARANTINED, message_id))
    for i, (message, context) in enumerate(zip(batch.messages, batch.contexts, strict=True)):
        if rejected and message.id in rejected:
            continue
        unchanged = conn.execute(
            "select 1 from tg_messages where id = ? and text = ? and embedded = 0", (message.id, message.text)
        ).fetchone()
        if unchanged is None or [m.id for m in load_context(conn, message)] != [m.id for m in context]:
            # Edited, or it or its context erased (memory.forget) while it was embedded: it stays pending,
            # and the vector of the text it no longer has leaves the cache too.
            conn.execute("delete from embedding_cache where hash = ?", (text_hash(index_text(message, context)),))
            continue
        vector = None if vectors is None else vectors[i]
        if vector is not None and is_indexable(message):
            vector_rows.append((message.id, message.chat_id, vector))
        refresh_context(conn, message, context_text(context))
        conn.execute("update tg_messages set embedded = 1 where id = ?", (message.id,))
        stored += 1
    write_vectors(conn, FEED, vector_rows)
    return stored


def refresh_context(conn: Connection, message: FeedMessage, context: str) -> None:
    """Rewrite the keyword row of ``message`` when its context column is not ``context`` (re-indexing a row
    tokenises all of its text again: seconds for a 10 MB paste whose context the trigger already got right)."""
    row = conn.execute("select context from tg_messages_fts where rowid = ?", (message.id,)).fetchone()
    if row is not None and row[0] == context:
        return
    conn.execute("delete from tg_messages_fts where rowid = ?", (message.id,))
    conn.execute(
        "insert into tg_messages_fts(rowid, sender_name, text, context, chat) values (?, ?, ?, ?, ?)",
        (message.id, message.sender_name, message.text, context, chat_token(message.chat_id)),
    )


async def embed_pending(db: Database, provider: EmbeddingProvider, batch: int = 64) -> int:
    """Embed every tg_messages row with ``embedded = 0``, ``batch`` at a time; return how many were stored."""
    if not db.vectors:
        return 0
    total = 0
    while True:
        pending = await db.read(lambda conn: read_pending(conn, batch))
        if not pending.messages:
            return total
        texts = [index_text(m, c) for m, c in zip(pending.messages, pending.contexts, strict=True)]
        alone = [message_line(m) for m in pending.messages]  # without the context, should a neighbour be bad
        vectors, rejected = await embed_or_isolate(provider, texts, [m.id for m in pending.messages], alone)
        model = (provider.model_id, provider.dims)
        stored = await db.write(partial(store_batch, batch=pending, vectors=vectors, model=model, rejected=rejected))
        if rejected:
            log.warning("feed_embedding_quarantined", messages=sorted(rejected), error=next(iter(rejected.values())))
        total += stored
        if stored == 0:
            # Every row changed under us; they are still pending, so yield before reading them again.
            await asyncio.sleep(0.05)


async def embed_or_isolate(
    provider: EmbeddingProvider, texts: list[str], ids: list[int], alone: list[str]
) -> tuple[list[np.ndarray | None], dict[int, str]]:
    """Vectors for ``texts``. If the batch fails, each text on its own, and a text that still fails once
    more without its context (``alone``: a bad neighbour is in the context of the next messages too).
    Returns (vectors, None for the rejected; id -> error of the rejected). When every text fails, the
    provider is down: the batch's error is raised and nothing is quarantined."""
    try:
        return list(await provider.embed(texts)), {}
    except Exception as batch_error:
        if len(texts) == 1:
            raise
        vectors: list[np.ndarray | None] = []
        rejected: dict[int, str] = {}
        for text, row_id, bare in zip(texts, ids, alone, strict=True):
            vector, error = await _embed_one(provider, text)
            if vector is None and bare != text:
                vector, error = await _embed_one(provider, bare)
            vectors.append(vector)
            if vector is None:
                rejected[row_id] = error
        if len(rejected) == len(texts):
            raise batch_error from None
        return vectors, rejected


async def _embed_one(provider: EmbeddingProvider, text: str) -> tuple[np.ndarray | None, str]:
    try:
        return (await provider.embed([text]))[0], ""
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


async def load_index(db: Database) -> None:
    """Bring the in-memory index of the feed's vectors up to date: all of them at start (the daemon waits for
    it before it reports ready, so no search pays for the load), then what each embedding round added."""
    if db.vectors:
        await db.read(partial(index_for, corpus=FEED))


async def fill_codes(db: Database, batch: int = CODE_BATCH) -> int:
    """Code the vectors stored before their index codes were (an archive from an older Teleton), a batch per
    write so messages are archived in between; how many."""
    done = 0
    while db.vectors and (filled := await db.write(partial(vector_store.fill_codes, corpus=FEED, limit=batch))):
        done += filled
    return done


class FeedEmbedder:
    """A background loop that embeds new feed messages shortly after they arrive.

    ``notify()`` after inserting messages wakes it (cheap, never blocks); it also polls every
    ``interval`` seconds so rows written by anything else are picked up too. It runs under the daemon's
    supervisor: a failing provider is retried with backoff and shows in ``teleton status``.
    """

    def __init__(self, db: Database, provider: EmbeddingProvider, *, batch: int = 64, interval: float = 5.0):
        self._db, self._provider, self._batch, self._interval = db, provider, batch, interval
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._coded = False  # the archive's older vectors have their index codes (``fill_codes``)

    def start(self, supervisor: Supervisor | None = None) -> None:
        if self._task is None:
            supervisor = supervisor or Supervisor(lambda name, reason: None)
            self._task = supervisor.run("embedding", self._loop)

    def notify(self) -> None:
        self._wake.set()

    async def stop(self, flush_s: float = 0.0) -> None:
        """Stop; first embed what is still pending for up to ``flush_s`` (the rest stays marked for next start)."""
        if flush_s > 0:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(embed_pending(self._db, self._provider, self._batch), flush_s)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self, up: Callable[[], None]) -> None:
        up()
        while True:
            self._wake.clear()
            count = await embed_pending(self._db, self._provider, self._batch)
            if count:
                log.debug("feed_embedded", messages=count)
            # Once a run: every vector written since carries its code, and looking again would scan the whole
            # table on the writer (0.4 s at 1M messages) every round.
            if not self._coded:
                await fill_codes(self._db)
                self._coded = True
            await load_index(self._db)  # new vectors into the in-memory index now, not in a search
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval):  # not wait_for: on 3.11 it can swallow stop()'s cancel
                    await self._wake.wait()
