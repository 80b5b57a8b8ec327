"""The Memory page's search: one question over every layer, each hit with why it ranked, as any clearance.

It is the same search the turn and the memory tools run (``memory.recall``: the clearance in the SQL and
checked again on every hit, the facts found as extra keys of their messages, the configured reranker), asked
as the owner or "as" a chat (a group, a person's DM), so the owner sees exactly what that chat's turns could
be shown.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from teleton.memory import recall
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.feed import reads
from teleton.memory.search.hybrid import DEFAULT_PARAMS, SearchHit, SearchParams
from teleton.privacy import OWNER, Clearance, Principals
from teleton.storage.database import Database
from teleton.text.lines import one_line

TEXT_CAP = 400


@dataclass(frozen=True)
class Found:
    layer: str  # knowledge | feed | facts
    source: str  # a file and heading, a chat and sender, a fact's subject and category
    label: str
    when: str
    score: float
    vector: float
    keyword: float
    time_boost: float
    text: str


@dataclass(frozen=True)
class MemorySearch:
    db: Database
    principals: Principals
    embedder: EmbeddingProvider | None = None
    params: SearchParams = DEFAULT_PARAMS
    reranker: recall.Reranker | None = None
    rerank_candidates: int = 0

    async def chats(self, limit: int = 50) -> list[tuple[int, str]]:
        """(chat id, its name) to search as: the chats most recently seen."""
        rows = await self.db.read(lambda conn: reads.recent_chats(conn, limit))
        kinds = {"dm": "DM", "group": "group", "channel": "channel"}
        return [(int(r[0]), f"{kinds.get(str(r[1]), r[1])} {r[2] or r[0]} ({r[0]})") for r in rows]

    def clearance(self, as_chat: int | None) -> Clearance:
        return Clearance(OWNER) if as_chat is None else self.principals.clearance(as_chat)

    async def search(self, text: str, as_chat: int | None = None, limit: int = 10) -> list[Found]:
        clearance = self.clearance(as_chat)
        q = recall.Question(text, await embed_query(self.embedder, text), clearance)
        params = replace(self.params, limit=limit)
        facts = await self.db.read(lambda conn: recall.shown_facts(conn, q, params, limit, lambda _: True))
        messages = await recall.messages(
            self.db, q, params, self.principals, facts, reranker=self.reranker, candidates=self.rerank_candidates
        )
        found = [_knowledge(h) for h in await recall.knowledge(self.db, q, params)] + [_fact(h) for h in facts]
        return _by_score(found, [self._feed(h) for h in messages])

    def _feed(self, hit: SearchHit) -> Found:
        meta = hit.meta
        who = "me" if meta["is_outgoing"] else (meta["sender_name"] or str(meta["sender_id"] or "?"))
        label = self.principals.chat_label(int(meta["chat_id"]))
        return _found("feed", f"chat {meta['chat_id']}, {who}", label, _date(meta["date"]), hit)


def _by_score(found: list[Found], messages: list[Found]) -> list[Found]:
    """Every hit by its score, except that the messages keep their own order (a reranker's, which their scores
    do not show) in the places the messages take."""
    ranked = sorted(found + messages, key=lambda f: -f.score)
    in_order = iter(messages)
    return [next(in_order) if f.layer == "feed" else f for f in ranked]


def _knowledge(hit: SearchHit) -> Found:
    meta = hit.meta
    source = str(meta["path"] or meta["source"]) + (f" — {meta['heading']}" if meta.get("heading") else "")
    return _found("knowledge", source, str(meta["label"]), "", hit)


def _fact(hit: SearchHit) -> Found:
    meta = hit.meta
    source = f"fact #{hit.id} about {meta['subject']} ({meta['category']})"
    if meta.get("valid_until"):
        source += ", no longer true"
    return _found("facts", source, str(meta["scope"]), _date(meta.get("created_at")), hit)


def _found(layer: str, source: str, label: str, when: str, hit: SearchHit) -> Found:
    text = one_line(hit.text, TEXT_CAP)
    boost = float(hit.meta.get("time_boost", 0.0))
    return Found(layer, source, label, when, hit.score, hit.vector_score, hit.keyword_score, boost, text)


def _date(value: Any) -> str:
    if not value:
        return ""
    return datetime.fromtimestamp(float(value)).astimezone().strftime("%Y-%m-%d %H:%M")
