"""Per-message RAG context (docs/architecture.md, docs/memory.md), privacy-gated.

Four steps: the 10 most recent messages of this chat (of this topic, in a forum), knowledge top 5 (+ facts
top 5), feed top 5 (in a topic: its own hits first), deduplicated; then two labelled blocks,
``[Relevant knowledge from memory]`` and ``[Relevant messages from Telegram feed]``. Every search runs
inside what the turn's clearance reads (``teleton.privacy``: labels for knowledge and facts, chats for the
feed), and every hit is checked against the clearance again before it is shown. The facts found are extra
keys of the messages they were drawn from (``memory.search.expansion``). Each item keeps its label:
the turn's taint (for the egress check) is the set of them, and an item from another chat or person is
rendered quoted, with its origin, as data. The query is embedded once and the vector is handed on (tool RAG
reuses it). Trivial messages ("ok", "thanks") skip retrieval: searching for "ok" only adds noise and latency.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from teleton.agent.prompt.memory import FeedLine, RagContext
from teleton.config.schema import AgentConfig, MemoryConfig, RerankerConfig, default
from teleton.gateway.contract import IncomingMessage
from teleton.memory import recall
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.facts.subjects import shown_subjects, speaker_subject
from teleton.memory.feed import reads
from teleton.memory.feed.reactions import FEEDBACK_DAYS, Judged, judged
from teleton.memory.feed.search import other_topic
from teleton.memory.recall import Question
from teleton.memory.search.hybrid import SearchHit, SearchParams
from teleton.privacy import Clearance, Principals
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

_TRIVIAL = {
    "ok",
    "okay",
    "k",
    "kk",
    "thanks",
    "thank you",
    "thx",
    "ty",
    "yes",
    "no",
    "yep",
    "yeah",
    "nope",
    "sure",
    "cool",
    "nice",
    "great",
    "lol",
    "haha",
    "hi",
    "hello",
    "hey",
    "bye",
    "good night",
    "gn",
    "np",
    "got it",
    "alright",
    "fine",
    "perfect",
    "thanks!",
    "ok thanks",
    "ok, thanks",
    "great, thanks",
}


def is_trivial(text: str) -> bool:
    """Whether a message is small talk that retrieval cannot help with."""
    norm = re.sub(r"[\s!.,?…]+", " ", text.lower()).strip()
    if not re.search(r"\w", norm):
        return True  # only emoji or punctuation
    return norm in _TRIVIAL or len(norm) <= 2


JUDGED_SHOWN = 3  # correction candidates a turn is shown at most


@dataclass(frozen=True)
class ContextSettings:
    recent: int = default(MemoryConfig, "context_recent")
    knowledge: int = default(MemoryConfig, "context_knowledge")
    feed: int = default(MemoryConfig, "context_feed")
    facts: int = 5
    params: SearchParams = field(default_factory=SearchParams)
    rerank_candidates: int = default(RerankerConfig, "candidates")  # with a reranker (memory.reranker)
    # Of one archived message, what a recent or feed line reads: as much as the model reads of a message
    # (agent.max_input_chars). A 10 MB paste stays whole in the archive; every later turn reads its head.
    message_chars: int = default(AgentConfig, "max_input_chars")


class ContextBuilder:
    def __init__(
        self,
        db: Database,
        embedder: EmbeddingProvider | None = None,
        settings: ContextSettings | None = None,
        principals: Principals | None = None,
        reranker: recall.Reranker | None = None,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.settings = settings or ContextSettings()
        self.principals = principals or Principals()
        self.reranker = reranker

    async def build(
        self,
        msg: IncomingMessage,
        clearance: Clearance,
        with_vector: Callable[[np.ndarray | None], Awaitable[Any]] | None = None,
    ) -> RagContext:
        """``with_vector`` (e.g. tool RAG) runs alongside the searches with the same query vector; its
        result lands in ``RagContext.extra``."""
        # The query embedding (a model run on its own thread) overlaps the recent-messages read and the feed's
        # keyword leg (which needs no vector); then the knowledge and feed searches run side by side on reader
        # connections.
        s = self.settings
        skip = is_trivial(msg.text)
        embedding = None if skip else asyncio.create_task(self._embed(msg.text))
        asked = Question(msg.text, None, clearance, asked_at=msg.date)  # "last week" as of the message asking
        feed_task = None
        if embedding is not None and s.feed:  # every chat the clearance reads, for the owner
            search = recall.feed(self.db, asked, self._feed_params(), self.principals, vector=embedding)
            feed_task = asyncio.create_task(search)
        try:
            recent, judged = await self.db.read(lambda conn: own_chat(conn, msg, s.recent, s.message_chars))
            recent = [replace(line, label=self.principals.chat_label(line.chat_id)) for line in recent]
            rag = RagContext(recent=recent, judged=judged, skipped=skip)
            if embedding is None:
                if with_vector is not None:
                    rag.extra = await with_vector(None)
                return rag
            rag.query_vector = vector = await embedding
        except BaseException:
            for task in (embedding, feed_task):
                if task is not None:
                    task.cancel()
            raise

        q = replace(asked, vector=vector)

        async def knowledge() -> list[SearchHit]:
            return await recall.knowledge(self.db, q, replace(s.params, limit=s.knowledge)) if s.knowledge else []

        async def facts() -> list[SearchHit]:
            # In a group, facts about a member go to that member only.
            if not s.facts:
                return []
            in_dm = msg.chat.type == "dm"
            keep = shown_subjects(in_dm, speaker_subject(self.principals, msg.sender.id if msg.sender else None))
            params = replace(s.params, limit=s.facts if in_dm else s.facts * 3)
            return await self.db.read(lambda conn: recall.shown_facts(conn, q, params, s.facts, keep))

        async def feed() -> list[SearchHit]:
            return [] if feed_task is None else await feed_task

        async def extra() -> Any:
            return None if with_vector is None else await with_vector(vector)

        hits, rag.knowledge, rag.facts, rag.extra = await asyncio.gather(feed(), knowledge(), facts(), extra())
        if s.feed:  # the facts found are extra keys of the messages they came from (issue 37), then the reranker
            ranked = await recall.arrange(
                self.db, q, hits, rag.facts, self.principals, reranker=self.reranker, candidates=s.rerank_candidates
            )
            rag.feed = await self.db.read(lambda conn: self._feed_lines(conn, msg, ranked, recent))
        return rag

    def _feed_params(self) -> SearchParams:
        """The feed search runs without a minimum score (see ``_feed_lines``) and for as many hits as the
        block can use after dropping what is already shown: each candidate of either leg costs a vector
        lookup on a 100k-message archive."""
        s = self.settings
        wanted = s.feed + s.recent + 1
        if self.reranker is not None:  # it judges a deeper pool than the block shows
            wanted = max(wanted, s.rerank_candidates)
        return replace(
            s.params,
            limit=wanted,
            min_score=0.0,
            vector_candidates=min(wanted, s.params.vector_candidates),
            keyword_candidates=min(wanted, s.params.keyword_candidates),
        )

    def _feed_lines(
        self,
        conn: Connection,
        msg: IncomingMessage,
        hits: list[SearchHit],
        recent: list[FeedLine],
    ) -> list[FeedLine]:
        """Feed top N, without the message being answered and without lines already shown as recent; in a
        forum topic the topic's own hits first, then the rest of the chat's, each marked as from another topic.

        The message being answered is archived before the agent sees it and matches itself best; left in,
        it would set the scale of the normalised scores and push real hits under the minimum. So the search
        runs without a minimum, those rows are dropped, and the minimum is applied relative to the best
        remaining hit.
        """
        s = self.settings
        seen = {(line.chat_id, line.message_id) for line in recent}
        seen.add((msg.chat.id, msg.message_id))
        kept = [h for h in hits if (int(h.meta["chat_id"]), int(h.meta["message_id"])) not in seen and h.text.strip()]
        if not kept:
            return []
        best = max(h.score for h in kept)
        kept = [h for h in kept if best > 0 and h.score / best >= s.params.min_score][: s.feed]
        others = sorted({int(h.meta["chat_id"]) for h in kept} - {msg.chat.id})
        titles = reads.chat_titles(conn, others) if others else {}
        lines = [
            replace(
                _feed_line(h.meta, h.text[: s.message_chars]),
                chat_title=titles.get(int(h.meta["chat_id"])) or "",
                label=self.principals.chat_label(int(h.meta["chat_id"])),
                score=h.score,
                other_topic=other_topic(int(h.meta["chat_id"]), h.meta.get("topic_id"), msg.chat.id, msg.topic_id),
            )
            for h in kept
        ]
        return sorted(lines, key=lambda line: line.other_topic)  # stable: by score within each part

    async def _embed(self, text: str) -> np.ndarray | None:
        if not self.db.vectors:
            return None
        return await embed_query(self.embedder, text)  # a failing provider degrades to keyword search


def own_chat(conn: Connection, msg: IncomingMessage, recent: int, chars: int) -> tuple[list[FeedLine], list[Judged]]:
    """What a turn reads of its own chat whatever it asks: the recent messages, and the answers people there
    marked wrong lately (correction candidates: the chat's own, so they never cross a label)."""
    since = msg.date - FEEDBACK_DAYS * 86_400
    return recent_messages(conn, msg, recent, chars=chars), judged(conn, msg.chat.id, since, JUDGED_SHOWN)


def recent_messages(conn: Connection, msg: IncomingMessage, limit: int, *, chars: int) -> list[FeedLine]:
    """The last ``limit`` messages of the chat (of the forum topic) ``msg`` was written in, before it, oldest
    first, each text read up to ``chars`` characters."""
    if limit <= 0:
        return []
    rows = reads.recent_lines(conn, msg.chat.id, limit, exclude=msg.message_id, chars=chars, topic=msg.topic_id)
    return [_feed_line(row, row["text"]) for row in rows]


def _feed_line(meta: Any, text: str) -> FeedLine:
    sender = "you" if meta["is_outgoing"] else (meta["sender_name"] or str(meta["sender_id"] or "someone"))
    chat_id, message_id, date = int(meta["chat_id"]), int(meta["message_id"]), float(meta["date"])
    return FeedLine(chat_id, message_id, date, sender, text, forwarded_from=meta["fwd_from"])
