"""The one search over memory: a question and a clearance -> what that clearance may read, per layer.

Every reader of memory uses it: the turn's context (``agent/prompt/retrieval.py``), the memory and archive
tools (``tools/families``), the dashboard's Memory page and `teleton feed search`. The clearance's scope goes
into the SQL of every search, and every hit is checked against the clearance again on the way out, so a bug in
one cannot show a row the other would hide. Each orders the archive's messages the same way (``arrange``): the
facts found for the question as extra keys, then a configured reranker.

Facts have two paths on purpose. ``shown_facts`` is what context shows: a plain ranked search that leaves
access counts alone (showing a fact is not the model using it). A tool's recall goes through
``FactStore.retrieve`` (its categories first, and every fact returned counts as used).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

import numpy as np

from teleton.memory.facts.rows import asks_about_past
from teleton.memory.facts.sources import of_facts
from teleton.memory.facts.store import predecessors
from teleton.memory.feed.reads import messages_by_key
from teleton.memory.search.corpora import FACTS, FEED, KNOWLEDGE
from teleton.memory.search.expansion import fuse
from teleton.memory.search.hybrid import SearchHit, SearchParams, hybrid_search, hybrid_search_db
from teleton.memory.search.time_ranges import query_time_range
from teleton.privacy import Clearance, Principals
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection


@dataclass(frozen=True)
class Question:
    """What is searched for, and by whom."""

    text: str
    vector: np.ndarray | None  # None: keyword search only
    clearance: Clearance
    asked_at: float | None = None  # "last week" is resolved against this (None: now)


class Reranker(Protocol):
    """A second judge of relevance (``memory.reranker``; ``memory.rerank.cross_encoder``)."""

    async def ascores(self, query: str, texts: Sequence[str]) -> np.ndarray: ...

    def close(self) -> None: ...


async def rerank(reranker: Reranker, q: Question, hits: list[SearchHit], candidates: int) -> list[SearchHit]:
    """The first ``candidates`` hits in the reranker's order (ties keep the search's order), the rest after.

    No reranker ships by default: the designs that need no download did not pay on LoCoMo dev
    (``scripts/eval_rerank.py``, docs/benchmarks.md), so this runs only for a configured cross-encoder."""
    head = hits[:candidates]
    if len(head) < 2:
        return hits
    scores = await reranker.ascores(q.text, [_said(h) for h in head])
    order = sorted(range(len(head)), key=lambda i: (-float(scores[i]), i))
    return [head[i] for i in order] + hits[candidates:]


def _said(hit: SearchHit) -> str:
    """A message as the feed embeds it, its sender first: questions name people."""
    sender = hit.meta.get("sender_name")
    return f"{sender}: {hit.text}" if sender else hit.text


async def knowledge(db: Database, q: Question, params: SearchParams) -> list[SearchHit]:
    """Chunks of the knowledge base (notes, session summaries, documents) whose label the clearance reads."""
    labels = q.clearance.readable()
    hits = await db.read(lambda conn: hybrid_search(conn, KNOWLEDGE, q.text, q.vector, params=params, scope=labels))
    return [h for h in hits if q.clearance.may_read(h.meta["label"])]


async def feed(
    db: Database,
    q: Question,
    params: SearchParams,
    principals: Principals,
    *,
    chats: list[int] | None = None,
    vector: asyncio.Future[np.ndarray | None] | None = None,
) -> list[SearchHit]:
    """Archived messages of the chats the clearance reads (or of ``chats``: the caller checked them), within
    the period the question names; the two legs run on two readers of their own. ``vector``: the question's
    embedding while it is being computed (instead of ``q.vector``), the keyword leg searching meanwhile."""
    scope = q.clearance.readable_chats() if chats is None else chats
    query_vector = q.vector if vector is None else vector
    when = partial(query_time_range, q.text, q.asked_at)  # found while the keyword leg searches
    hits = await hybrid_search_db(db, FEED, q.text, query_vector, params=params, scope=scope, when=when)
    return [h for h in hits if q.clearance.may_read(principals.chat_label(int(h.meta["chat_id"])))]


async def messages(
    db: Database,
    q: Question,
    params: SearchParams,
    principals: Principals,
    facts: list[SearchHit],
    *,
    reranker: Reranker | None = None,
    candidates: int = 0,
    chats: list[int] | None = None,
) -> list[SearchHit]:
    """The archive's best ``params.limit`` messages for ``q`` (in ``chats`` only, when given: the caller checked
    them), ordered as the turn's context orders them (``arrange``) with the ``facts`` found for ``q``."""
    deeper = params if reranker is None else replace(params, limit=max(params.limit, candidates))
    hits = await feed(db, q, deeper, principals, chats=chats)
    ranked = await arrange(db, q, hits, facts, principals, reranker=reranker, candidates=candidates, chats=chats)
    return ranked[: params.limit]


async def arrange(
    db: Database,
    q: Question,
    hits: list[SearchHit],
    facts: list[SearchHit],
    principals: Principals,
    *,
    reranker: Reranker | None = None,
    candidates: int = 0,
    chats: list[int] | None = None,
) -> list[SearchHit]:
    """The feed's ``hits`` in the one order every reader shows: the ``facts`` found for the same question as
    extra keys of the messages they came from (``expand_feed``), then a configured reranker's order."""
    if facts:
        hits = await db.read(lambda conn: expand_feed(conn, q, hits, facts, principals, chats=chats))
    return hits if reranker is None else await rerank(reranker, q, hits, candidates)


def expand_feed(
    conn: Connection,
    q: Question,
    feed_hits: list[SearchHit],
    fact_hits: list[SearchHit],
    principals: Principals,
    *,
    chats: list[int] | None = None,
) -> list[SearchHit]:
    """The feed's hits with the facts found for the same question as extra keys of the messages they came from
    (``memory.search.expansion``): re-scored, and a message only its facts found added (from ``chats`` only,
    when given). A fact lifts only messages of its own label (a chat's fact, that chat's messages), so nothing
    the clearance could not read before comes in."""
    links = of_facts(conn, [h.id for h in fact_hits]) if fact_hits else {}
    wanted = None if chats is None else set(chats)

    def sources(fact: SearchHit) -> list[tuple[int, int]]:
        own_label = [k for k in links.get(fact.id, []) if principals.chat_label(k[0]) == fact.meta["scope"]]
        return own_label if wanted is None else [k for k in own_label if k[0] in wanted]

    lifts = [(h.score, sources(h)) for h in fact_hits if q.clearance.may_read(h.meta["scope"])]
    if not any(keys for _, keys in lifts):
        return feed_hits
    own = {(int(h.meta["chat_id"]), int(h.meta["message_id"])): h for h in feed_hits}
    ranked = fuse(((key, h.score) for key, h in own.items()), lifts)
    rows = messages_by_key(conn, [key for key, _ in ranked if key not in own], FEED.columns)
    found = []
    for key, score in ranked:
        if key in own:
            found.append(replace(own[key], score=score))
        elif key in rows:
            row = rows[key]
            meta = {c: row[c] for c in FEED.columns}
            found.append(SearchHit(int(row["id"]), str(row["text"]), score, 0.0, 0.0, FEED.name, meta))
    return found


def shown_facts(
    conn: Connection, q: Question, params: SearchParams, limit: int, keep: Callable[[str], bool]
) -> list[SearchHit]:
    """The ``limit`` best current facts the clearance reads about subjects ``keep`` admits; a question about
    the past also gets the facts they superseded, each ranked just under its successor."""
    hits = hybrid_search(conn, FACTS, q.text, q.vector, params=params, scope=q.clearance.readable())
    kept = [h for h in hits if q.clearance.may_read(h.meta["scope"]) and keep(h.meta["subject"])][:limit]
    return kept + (history_hits(conn, kept) if asks_about_past(q.text) else [])


def history_hits(conn: Connection, hits: list[SearchHit]) -> list[SearchHit]:
    """The facts that ``hits`` superseded, as hits of their own (shown marked as no longer true), each
    ranked just under the fact that replaced it, so the memory budget keeps them together."""
    scores = {h.id: h.score for h in hits}
    found = []
    for f in predecessors(conn, list(scores)):  # newest ending first: a successor is scored before its past
        scores[f.id] = scores.get(f.superseded_by or 0, 0.0) * 0.99
        found.append(SearchHit(f.id, f.value, scores[f.id], 0.0, 0.0, FACTS.name,
                               {"scope": f.scope, "category": f.category, "subject": f.subject,
                                "valid_until": f.valid_until}))  # fmt: skip
    return found
