"""The memory budget of one turn: at most ``memory.prompt_budget_tokens`` of memory in a prompt (docs/memory.md,
"Memory budget per turn").

Two parts, because the provider caches the request's prefix (``llm.prompt_cache``): the stable part, system
block 2 (summary, important facts, learnings, MEMORY.md), gets a fixed share (``memory.prompt_stable_share``)
filled in a fixed order with nothing of the turn in it, so it stays byte-identical and keeps hitting the cache;
the per-turn part, the rest, is filled by relevance across knowledge, facts, feed hits, recent messages and
daily-log entries. Items go in whole, the most relevant first, counted with ``text.tokens.estimate_tokens``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TypeVar

import structlog

from teleton.agent.prompt.memory import FEED_HEADER, JUDGED_HEADER, KNOWLEDGE_HEADER, MemoryUsage, RagContext
from teleton.memory.knowledge.chunker import chunk_markdown
from teleton.memory.search.fts_query import query_terms
from teleton.privacy.quoting import origins_in
from teleton.text.tokens import estimate_tokens

log = structlog.get_logger(__name__)
T = TypeVar("T")

SEPARATOR = "\n\n"  # what may follow an item or a header in the rendered text: counted with it
STEM = 5  # a question's word is found by its first 5 letters ("gardens" finds "gardening")
_EXCHANGE = re.compile(r"^(> )?\[\d{2}:\d{2}\] ")  # a daily log's exchange line (``daily_logs.exchange_line``)

# Section headers of the system prompt's memory parts (``prompt``).
MEMORY_MD = "## Long-term memory (MEMORY.md)"
IMPORTANT_FACTS = "## Important facts"
SUMMARY = "## Summary of the earlier conversation in this chat"


def tokens(text: str) -> int:
    return estimate_tokens(text)


def stable_cap(budget: int | None, share: float) -> int | None:
    """Tokens of memory the cached system block may hold: a fixed share of the budget, the same every turn."""
    return None if budget is None else int(budget * share)


@dataclass(frozen=True)
class Item:
    """One whole piece of memory as it will be rendered, under its section's header."""

    kind: str
    section: str  # the header it goes under
    text: str
    score: float = 0.0
    index: int = 0  # position in its source, for rendering in the source's order

    @property
    def cost(self) -> int:
        return tokens(self.text + SEPARATOR)


@dataclass(frozen=True)
class Filled:
    kept: list[Item]
    usage: MemoryUsage

    def section(self, header: str, joiner: str = "\n") -> str:
        """The header and its kept items in their source's order; '' when none was kept."""
        items = sorted((i for i in self.kept if i.section == header), key=lambda i: i.index)
        return header + "\n" + joiner.join(i.text for i in items) if items else ""


def fill(items: Iterable[Item], budget: int | None) -> Filled:
    """Whole items in the order given while they fit (None: no limit); one that does not fit is skipped, and a
    smaller one after it may still fit. A section's header is counted once, with its first item; the estimate
    rounds up, so a whole block never counts more than the sum of its items."""
    kept: list[Item] = []
    opened: set[str] = set()
    usage = MemoryUsage(budget)
    left = budget
    for item in items:
        cost = item.cost + (0 if item.section in opened else tokens(item.section + SEPARATOR))
        if left is not None and cost > left:
            usage.dropped[item.kind] = usage.dropped.get(item.kind, 0) + 1
            continue
        kept.append(item)
        opened.add(item.section)
        usage.tokens[item.kind] = usage.tokens.get(item.kind, 0) + cost
        if left is not None:
            left -= cost
    return Filled(kept, usage)


# -- the stable part (block 2) ---------------------------------------------------------------------------
def stable_items(summary: str, facts: Sequence[str], learnings: str, memory_md: str) -> list[Item]:
    """Block 2's memory in the order it is filled: the summary of this conversation, the facts marked
    important, the owner's corrections, MEMORY.md newest chunk first, past tool errors. Ranking it by the
    question would rewrite it every turn (a cache miss for it and all after it); a MEMORY.md chunk left out is
    still in the knowledge index, where it competes by relevance for the per-turn part."""
    items = [Item("summary", SUMMARY, summary.strip())] if summary.strip() else []
    items += [Item("important facts", IMPORTANT_FACTS, f"- {line}", index=i) for i, line in enumerate(facts)]
    sections = _learning_sections(learnings)
    errors = [i for i in sections if "error" in i.section.lower()]
    items += [i for i in sections if i not in errors]
    chunks = _chunks(memory_md)
    items += [Item("MEMORY.md", MEMORY_MD, text, index=i) for i, text in reversed(list(enumerate(chunks))) if text]
    return items + errors


@lru_cache(maxsize=8)  # MEMORY.md changes rarely; chunking 20 kB costs milliseconds every turn
def _chunks(text: str) -> tuple[str, ...]:
    """MEMORY.md as the knowledge index cuts it: whole notes, never a cut list or code block."""
    return tuple(c.text.strip() for c in chunk_markdown(text)) if text.strip() else ()


def _learning_sections(text: str) -> list[Item]:
    """``Learnings.for_prompt``'s '## Title' sections of '- ' lines, one item per line."""
    items: list[Item] = []
    for part in text.split("\n\n"):
        header, _, body = part.strip().partition("\n")
        if header.startswith("## "):
            lines = [line for line in body.splitlines() if line.strip()]
            items += [Item("learnings", header, line, index=i) for i, line in enumerate(lines)]
    return items


# -- the per-turn part -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TurnPlan:
    rag: RagContext  # what of the retrieved context is shown
    days: list[str]  # the daily-log sections shown, rendered
    usage: MemoryUsage


def plan_turn(
    rag: RagContext,
    days: Sequence[tuple[str, str]],
    query: str,
    own_label: str,
    allowance: int | None,
) -> TurnPlan:
    """The turn's RAG items and daily-log entries (``days``: (header, log text)) that fit ``allowance``,
    most relevant first."""
    terms = _stems(query_terms(query))
    items = rag_items(rag, own_label, terms) + log_items(days, terms)
    filled = fill(sorted(items, key=lambda i: -i.score), allowance)
    keep: dict[str, set[int]] = {}
    for item in filled.kept:
        keep.setdefault(item.kind, set()).add(item.index)
    trimmed = replace(
        rag,
        knowledge=_pick(rag.knowledge, keep.get("knowledge")),
        facts=_pick(rag.facts, keep.get("facts")),
        feed=_pick(rag.feed, keep.get("feed")),
        recent=_pick(rag.recent, keep.get("recent")),
        judged=_pick(rag.judged, keep.get("marked wrong")),
    )
    rendered = [filled.section(header) for header, _ in days]
    return TurnPlan(trimmed, [s for s in rendered if s], filled.usage)


def _pick(items: list[T], indexes: set[int] | None) -> list[T]:
    return [x for i, x in enumerate(items) if indexes and i in indexes]


def rag_items(rag: RagContext, own_label: str, terms: set[str]) -> list[Item]:
    """The retrieved context as items: hits scored by their search, recent messages by recency and words."""
    lines = rag.lines(own_label)
    items = [
        Item(kind, KNOWLEDGE_HEADER, line, hit.score, i)
        for kind, hits in (("knowledge", rag.knowledge), ("facts", rag.facts))
        for i, (hit, line) in enumerate(zip(hits, lines[kind], strict=True))
    ]
    items += [
        Item("feed", FEED_HEADER, line, feed.score, i)
        for i, (feed, line) in enumerate(zip(rag.feed, lines["feed"], strict=True))
    ]
    count = len(rag.recent)
    items += [
        Item("recent", FEED_HEADER, line, unscored(count - 1 - i, count, terms, msg.text), i)
        for i, (msg, line) in enumerate(zip(rag.recent, lines["recent"], strict=True))
    ]
    count = len(rag.judged)  # newest first
    items += [
        Item("marked wrong", JUDGED_HEADER, line, unscored(i, count, terms, line), i)
        for i, line in enumerate(lines["marked wrong"])
    ]
    return items


def log_items(days: Sequence[tuple[str, str]], terms: set[str]) -> list[Item]:
    """The entries of the daily logs (oldest day first), scored by recency and words. An entry of words
    from elsewhere (a group's exchange, quoted with its origin) comes in only when it shares a word with
    the question: it may steer the turn (``teleton.privacy.egress``), so it must earn its place."""
    entries = [(header, i, entry) for header, text in days for i, entry in enumerate(log_entries(text))]
    count = len(entries)
    return [
        Item("daily logs", header, entry, unscored(count - 1 - n, count, terms, entry), i)
        for n, (header, i, entry) in enumerate(entries)
        if overlap(terms, entry) or not any(origins_in(entry))
    ]


def log_entries(text: str) -> list[str]:
    """A daily log as whole entries: an exchange line, or a '## [HH:MM] title' section with its lines."""
    entries: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            entries.append([])  # a blank line ends a section
        elif line.startswith("## ") or _EXCHANGE.match(line) or not entries or not entries[-1]:
            entries.append([line])
        elif entries[-1][0].startswith("## ") or (line.startswith(">") and entries[-1][0].startswith(">")):
            entries[-1].append(line)  # a section's lines; a quoted section's cut by the tail stay with its origin
        else:
            entries.append([line])
    return ["\n".join(e) for e in entries if e]


def unscored(age: int, count: int, terms: set[str], text: str) -> float:
    """Relevance of an item no search scored: ``age`` 0 is the newest of ``count``. The 0.5 / 0.5 of the search
    fusion, with recency standing in for the leg it lacks."""
    recency = 1.0 - age / count if count else 0.0
    return 0.5 * recency + 0.5 * overlap(terms, text)


def overlap(terms: set[str], text: str) -> float:
    """The share of the question's words ``text`` contains."""
    # A substring test, not a tokenisation: 200 log entries a turn must cost well under a millisecond.
    lowered = text.lower()
    return sum(term in lowered for term in terms) / len(terms) if terms else 0.0


def _stems(words: Iterable[str]) -> set[str]:
    return {w[:STEM] for w in words}


def log_left_out(chat_id: int, usage: MemoryUsage) -> None:
    if usage.dropped:
        log.debug("memory_left_out", chat_id=chat_id, budget=usage.budget, used=usage.total, items=usage.dropped)
