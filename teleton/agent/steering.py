"""Steering that outlives a turn: what a steered exchange leaves in a session travels with its origin.

A turn shown words from elsewhere (another chat's, a web page's, a document's) may have been steered by
them (``teleton.privacy.egress``). Its exchange stays in the session, so the session keeps its user message
with what steered it (``aftercare.kept_user``); everything made from such messages later — a compaction's
summary, the facts distilled from them — must carry the same origin or be left out, or the planted words
would come back as the owner's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from teleton.agent.messages import texts
from teleton.agent.window.compaction import is_user_turn
from teleton.llm.client import Message
from teleton.privacy import PUBLIC, Taint


def shown(taint: Taint, system: Sequence[str], rag: str, said: str, history: Sequence[Message]) -> None:
    """A turn's request is built: words quoted from elsewhere in any part of it (the system prompt's notes,
    facts, summary and daily logs, the retrieved context, the message, the session's history) steer as
    much as a search hit from another chat does."""
    for text in (*system, rag, said, *texts(history)):
        taint.absorb(text)


def steering_of(messages: Iterable[Message], own: str, *more: str) -> frozenset[str]:
    """What steered any of ``messages`` (and the ``more`` texts, e.g. an earlier summary), for a session
    of label ``own``."""
    taint = Taint({own, PUBLIC})
    for text in (*texts(messages), *more):
        taint.absorb(text)
    return taint.steering(own)


def unsteered(messages: Sequence[Message], own: str) -> list[Message]:
    """``messages`` without the exchanges (a user message and what answered it) that something steered:
    what the distiller may turn into facts under the session's own label."""
    exchanges: list[list[Message]] = []
    for message in messages:
        if is_user_turn(message) or not exchanges:
            exchanges.append([])
        exchanges[-1].append(message)
    return [message for exchange in exchanges if not steering_of(exchange, own) for message in exchange]
