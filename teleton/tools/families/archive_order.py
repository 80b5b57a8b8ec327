"""The archive's messages a tool shows, found and ordered as the turn's own context has them.

``memory_search`` and ``search_messages`` both go through ``memory.recall.messages``: the facts this chat is
shown for the question lift the messages they came from, and a configured reranker orders the pool. A tool
never ranks the archive otherwise than the turn that called it.
"""

from __future__ import annotations

from typing import Any

from teleton.memory import recall
from teleton.memory.embeddings.query import embed_query
from teleton.memory.facts.subjects import shown_subjects, speaker_subject
from teleton.memory.recall import Question
from teleton.memory.search.hybrid import SearchHit, SearchParams
from teleton.tools.registry import ToolContext


async def query_vector(ctx: ToolContext, text: str) -> Any:
    """The question's vector, or None when the archive has no vectors (keyword search only)."""
    if not getattr(ctx.deps.db, "vectors", False):
        return None
    return await embed_query(ctx.deps.embedder, text)


async def archive_messages(
    ctx: ToolContext, q: Question, params: SearchParams, chats: list[int] | None
) -> list[SearchHit]:
    """The best ``params.limit`` messages for ``q`` in ``chats`` (None: every chat the clearance reads; the
    caller checked ``chats``)."""
    deps = ctx.deps
    facts: list[SearchHit] = []
    if deps.facts is not None:  # fact memory on: its facts are keys of their messages, as in the turn
        keep = shown_subjects(
            ctx.chat.type == "dm", speaker_subject(deps.principals, ctx.sender.id if ctx.sender else None)
        )
        facts = await deps.db.read(lambda conn: recall.shown_facts(conn, q, params, params.limit, keep))
    return await recall.messages(
        deps.db, q, params, deps.principals, facts,
        reranker=deps.reranker, candidates=deps.rerank_candidates, chats=chats,
    )  # fmt: skip
