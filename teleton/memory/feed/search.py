"""Search the Telegram feed (tg_messages) within a chat scope.

The scope is the privacy boundary of docs/privacy.md: a group turn passes its own chat id only; a DM with the
owner may pass None (all chats). The scope is applied inside both retrieval legs (see ``search.hybrid``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import structlog

from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.search.corpora import FEED
from teleton.memory.search.hybrid import DEFAULT_PARAMS, SearchHit, SearchParams, hybrid_search, hybrid_search_db
from teleton.memory.search.time_ranges import query_time_range
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)


@dataclass
class FeedHit:
    id: int
    chat_id: int
    message_id: int
    sender_id: int | None
    sender_name: str
    date: float
    text: str
    is_outgoing: bool
    score: float
    vector_score: float
    keyword_score: float
    topic_id: int | None = None  # the forum topic it was written in
    fwd_from: str | None = None  # a forwarded message: whom it was forwarded from (its words are theirs)


def search_feed_sync(
    conn: Connection,
    query: str,
    query_vector: np.ndarray | None,
    chat_ids: Sequence[int] | None,
    params: SearchParams = DEFAULT_PARAMS,
    now: float | None = None,
) -> list[FeedHit]:
    when = query_time_range(query, now)
    hits = hybrid_search(conn, FEED, query, query_vector, params=params, scope=chat_ids, when=when)
    return [feed_hit(h) for h in hits]


def feed_hit(h: SearchHit) -> FeedHit:
    return FeedHit(
        id=h.id,
        chat_id=int(h.meta["chat_id"]),
        message_id=int(h.meta["message_id"]),
        sender_id=h.meta["sender_id"],
        sender_name=str(h.meta["sender_name"]),
        date=float(h.meta["date"]),
        text=h.text,
        is_outgoing=bool(h.meta["is_outgoing"]),
        score=h.score,
        vector_score=h.vector_score,
        keyword_score=h.keyword_score,
        topic_id=h.meta.get("topic_id"),
        fwd_from=h.meta.get("fwd_from"),
    )


def other_topic(hit_chat: int, hit_topic: int | None, chat_id: int, topic_id: int | None) -> bool:
    """A hit from another topic of the asking chat: it comes after the topic's own hits and says so (a forum's
    topics are separate conversations; the General topic and a chat without topics are topic None)."""
    return hit_chat == chat_id and hit_topic != topic_id


async def search_feed(
    db: Database,
    query: str,
    *,
    chat_ids: Sequence[int] | None,
    provider: EmbeddingProvider | None = None,
    params: SearchParams = DEFAULT_PARAMS,
    query_vector: np.ndarray | None = None,
    now: float | None = None,
) -> list[FeedHit]:
    """Messages matching ``query`` in ``chat_ids`` (None = every chat; [] = none).

    The query is embedded with ``provider`` unless ``query_vector`` is given (e.g. one vector shared by the
    knowledge, feed and fact searches of a turn). A time the query names ("last week", "in May") is taken
    relative to ``now`` (default: the current time) and ranks messages of that time higher.
    """
    vector = query_vector
    if vector is None and db.vectors:
        vector = await embed_query(provider, query)
    scope = None if chat_ids is None else list(chat_ids)
    when = partial(query_time_range, query, now)  # found while the keyword leg searches
    hits = await hybrid_search_db(db, FEED, query, vector, params=params, scope=scope, when=when)
    return [feed_hit(h) for h in hits]


async def prepare_search(db: Database) -> None:
    """One search of every chat on each reader connection, so the first search after the start costs what the
    next ones do: at 1M messages the first three after a start took 80-130 ms each against 40 ms, paying for
    the connection, the schema and the index's first pages. Run once, after ``load_index``."""
    vector = None
    if db.vectors:
        newest = await db.fetchone(f"select vector from {FEED.vec} order by seq desc limit 1")
        vector = None if newest is None else np.frombuffer(newest[0], np.float16).astype(np.float32)
    readers = await db.read_each(lambda conn: search_feed_sync(conn, "hello", vector, None))
    log.info("search_prepared", readers=readers)
