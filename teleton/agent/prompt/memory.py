"""What memory a turn's prompt holds: what retrieval found (``RagContext``, built by ``retrieval.py``),
how each item reads in the prompt, and how many tokens of memory the prompt spent (``MemoryUsage``, counted
by ``budget.py``). Records the turn carries, so they import nothing else of the agent."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from teleton.memory.facts.rows import day
from teleton.memory.feed.reactions import Judged
from teleton.memory.search.hybrid import SearchHit
from teleton.privacy.paths import is_document
from teleton.privacy.quoting import forwarded, outside, shown_to
from teleton.text.lines import one_line

KNOWLEDGE_HEADER = "[Relevant knowledge from memory]"
FEED_HEADER = "[Relevant messages from Telegram feed]"
JUDGED_HEADER = "[Your answers people in this chat marked wrong]"
LINE_CAP = 500  # one feed line; a pasted 10 kB message must not fill the context
# Kinds of memory, in the order /status lists them.
KINDS = (
    "summary", "important facts", "learnings", "MEMORY.md", "daily logs", "knowledge", "facts", "feed", "recent",
    "marked wrong",
)  # fmt: skip


@dataclass(frozen=True)
class FeedLine:
    chat_id: int
    message_id: int
    date: float
    sender: str
    text: str
    chat_title: str = ""
    label: str = ""  # the chat's privacy label
    score: float = 0.0  # a feed hit's search score (the memory budget ranks by it); 0 for recent messages
    other_topic: bool = False  # said in another topic of the turn's forum (another conversation)
    forwarded_from: str | None = None  # a forwarded message: its words are whoever it came from

    def render(self, own_label: str) -> str:
        when = datetime.fromtimestamp(self.date).astimezone()
        where = " (in another topic)" if self.other_topic else ""
        said = f"[{when:%Y-%m-%d %H:%M}]{where} {self.sender}: {' '.join(self.text.split())[:LINE_CAP]}"
        return shown_to(
            own_label, self.label, forwarded(said, self.forwarded_from), self.chat_title or str(self.chat_id)
        )


@dataclass
class RagContext:
    recent: list[FeedLine] = field(default_factory=list)
    knowledge: list[SearchHit] = field(default_factory=list)
    facts: list[SearchHit] = field(default_factory=list)
    feed: list[FeedLine] = field(default_factory=list)
    query_vector: np.ndarray | None = None
    judged: list[Judged] = field(default_factory=list)  # this chat's answers marked wrong (correction candidates)
    skipped: bool = False  # retrieval skipped (trivial message)
    extra: Any = None  # what the caller's ``with_vector`` returned (the tool-RAG pick)

    def labels(self) -> set[str]:
        """The labels of everything this context shows (the turn's taint grows by them)."""
        return (
            {h.meta["label"] for h in self.knowledge}
            | {h.meta["scope"] for h in self.facts}
            | {line.label for line in self.recent + self.feed}
        )

    def origins(self) -> set[str]:
        """Outside content among what this context shows: the text of documents kept in the knowledge base."""
        paths = (str(h.meta.get("path") or "") for h in self.knowledge)
        return {outside("document", path) for path in paths if is_document(path)}

    def lines(self, own_label: str) -> dict[str, list[str]]:
        """Each item as rendered, by kind (the memory budget counts exactly what ``render`` shows)."""
        return {
            "knowledge": [
                _hit_line(h, h.meta["label"], h.meta.get("path") or h.meta.get("source") or "", own_label)
                for h in self.knowledge
            ],
            "facts": [_hit_line(h, h.meta["scope"], _fact_what(h), own_label) for h in self.facts],
            "recent": [line.render(own_label) for line in self.recent],
            "feed": [line.render(own_label) for line in self.feed],
            "marked wrong": [judged_line(j) for j in self.judged],
        }

    def render(self, own_label: str) -> str:
        parts = []
        by_kind = self.lines(own_label)
        lines = by_kind["knowledge"] + by_kind["facts"]
        if lines:
            parts.append(KNOWLEDGE_HEADER + "\n" + "\n".join(lines))
        feed = by_kind["recent"] + by_kind["feed"]
        if feed:
            parts.append(FEED_HEADER + "\n" + "\n".join(feed))
        if by_kind["marked wrong"]:
            parts.append(JUDGED_HEADER + "\n" + "\n".join(by_kind["marked wrong"]))
        return "\n\n".join(parts)


def judged_line(j: Judged) -> str:
    """A correction candidate: what was asked, what we said, and how it was judged (the chat's own words)."""
    how = f'replied "{one_line(j.signal, 300)}"' if j.replied else f"reacted {j.signal}"
    asked = f'to "{one_line(j.question, 200)}" ' if j.question else ""
    return f'- [{day(j.date)}] {j.by} {how} {asked}when you answered "{one_line(j.answer, 300)}"'


def _fact_what(hit: SearchHit) -> str:
    until = hit.meta.get("valid_until")
    return f"fact, {hit.meta['category']}" + (f", no longer true since {day(until)}" if until else "")


def _hit_line(hit: SearchHit, label: str, what: str, own_label: str) -> str:
    return "- " + shown_to(own_label, label, f"({what}) {hit.text.strip()}")


@dataclass
class MemoryUsage:
    """Tokens of memory one turn put in its prompt, per kind, and how many items were left out."""

    budget: int | None
    tokens: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.tokens.values())

    def plus(self, other: MemoryUsage, budget: int | None) -> MemoryUsage:
        """Both parts' figures, under the budget of the whole."""
        return MemoryUsage(budget, _add(self.tokens, other.tokens), _add(self.dropped, other.dropped))


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in KINDS if k in a or k in b}
