"""The distiller: the utility model picks out durable facts and they are saved (docs/memory.md, Facts).

After a turn the exchange is distilled in the background; before a compaction or at the memory flush, the
session's messages (``distill_transcript``), so facts are written before the messages are dropped. Commits run one
at a time per chat. The model answers through a tool with a JSON schema: a malformed fact is dropped and counted,
a near duplicate merges, ``replaces`` names a fact it was shown, ``about`` whom it is about. Every fact takes its
turn's label, whatever scope the model claims (docs/privacy.md); corrections reach ``learnings/corrections.md``
from the owner only; a ``#nomem`` message is never distilled.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import jsonschema
import structlog

from teleton.agent.distill_prompt import FACT_SCHEMA, SYSTEM, TOOL, TOOL_NAME
from teleton.agent.locks import KeyedLocks
from teleton.agent.window.compaction import Message, is_user_turn, numbered_transcript
from teleton.agent.window.oversize import excerpt
from teleton.gateway.contract import ChatInfo
from teleton.llm.client import LLMClient, LLMError
from teleton.memory.facts.dates import dated
from teleton.memory.facts.merge import NEAR_DUPLICATE, save_merging
from teleton.memory.facts.rows import Fact, StoredFact
from teleton.memory.facts.sources import link
from teleton.memory.facts.store import FactStore
from teleton.memory.facts.subjects import chat_members, label_speaker, resolve
from teleton.memory.journal.learnings import Learnings
from teleton.privacy import OWNER, Principals

log = structlog.get_logger(__name__)

OFF_SWITCH = re.compile(r"#nomem(ory)?\b", re.IGNORECASE)
QUALITY_WARNING_STREAK = 3
EXCHANGE_MAX_TOKENS = 1024
EXCHANGE_CHARS = 4_000  # of each side of an exchange: a fact is in a sentence, not in a pasted log
TRANSCRIPT_MAX_TOKENS = 2048  # a long session holds more facts than one exchange
TRANSCRIPT_HEADER = "Extract the durable facts from this conversation"
KNOWN_FACTS = 12  # remembered facts shown to the model, the ones nearest to the conversation
KNOWN_QUERY_CHARS = 2_000


@dataclass(frozen=True)
class Exchange:
    chat: ChatInfo
    user_name: str
    user_text: str
    assistant_text: str
    label: str  # the turn's clearance label: every fact of this exchange is stored under it
    speaker: str = ""  # the sender's subject (teleton.memory.facts.subjects)
    message_ids: tuple[int, ...] = ()  # the archived messages of the exchange: each fact's sources
    said_at: float | None = None  # when the person wrote: "last Friday" in a fact is resolved against it


@dataclass(frozen=True)
class Transcript:
    """Session messages about to leave the context window (compaction, session end, the memory flush)."""

    chat: ChatInfo
    messages: Sequence[Message]
    label: str  # the session's chat label: every fact of the transcript is stored under it


@dataclass
class DistillStats:
    saved: Counter[str] = field(default_factory=Counter)  # per label kind: owner / user / chat
    updated: Counter[str] = field(default_factory=Counter)
    superseded: int = 0  # facts that replaced a remembered one (kept as history)
    duplicates: int = 0
    dropped: int = 0  # malformed facts (or a malformed response)
    corrections: int = 0
    skipped: str | None = None  # why nothing was asked of the model
    kept: list[Fact] = field(default_factory=list)  # facts inserted or updated, as stored


@dataclass(frozen=True)
class _Where:
    """Where the facts of one model answer come from and go to."""

    label: str
    source: str
    speaker: str
    chat_id: int
    members: dict[str, str]  # names in the chat -> subjects
    shown: frozenset[int]  # the remembered facts the model was shown (the only ones it may replace)
    sources: tuple[int, ...] = ()  # the archived messages the facts are drawn from (in ``chat_id``)
    said_at: float | None = None  # when the exchange took place (``memory.facts.dates``)
    lines: Mapping[int, tuple[int, int, float]] = field(default_factory=dict)  # a transcript's user lines

    def of(self, item: dict[str, Any]) -> tuple[tuple[int, ...], float | None]:
        """The archived messages one fact was drawn from and when: the transcript lines it names (those of this
        chat that the transcript numbered; any other number is ignored), else the exchange's."""
        named = [self.lines[n] for n in item.get("from") or () if n in self.lines]
        rows = [(message_id, date) for chat_id, message_id, date in named if chat_id == self.chat_id]
        if not rows:
            return self.sources, self.said_at
        return tuple(sorted({m for m, _ in rows})), max(date for _, date in rows)


def _label_kind(label: str) -> str:
    return label.split(":", 1)[0]


class Distiller:
    def __init__(
        self,
        llm: LLMClient,
        facts: FactStore,
        learnings: Learnings | None = None,
        *,
        enabled: bool = True,
        near_duplicate: float = NEAR_DUPLICATE,
        principals: Principals | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.llm = llm
        self.principals = principals or Principals()
        self.facts = facts
        self.learnings = learnings
        self.enabled = enabled
        self.near_duplicate = near_duplicate
        self._locks = KeyedLocks()
        self.on_error = on_error  # the daemon's health record
        self._tasks: set[asyncio.Task[DistillStats]] = set()
        self._malformed_streak = 0
        self.totals = DistillStats()

    def schedule(self, exchange: Exchange) -> asyncio.Task[DistillStats] | None:
        """Distil in the background; returns the task (tests and shutdown may await it)."""
        if not self.should_distill(exchange):
            return None
        task = asyncio.get_running_loop().create_task(self._serialised(exchange), name=f"distill-{exchange.chat.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def should_distill(self, exchange: Exchange) -> bool:
        return self.enabled and not OFF_SWITCH.search(exchange.user_text) and bool(exchange.user_text.strip())

    async def _serialised(self, exchange: Exchange) -> DistillStats:
        async with self._locks.hold(exchange.chat.id):
            try:
                return await self.distill(exchange)
            except Exception as exc:  # a background job must never take the daemon down
                log.warning("memory.commit_failed", chat_id=exchange.chat.id, error=str(exc))
                if self.on_error is not None:
                    self.on_error(exc)
                return DistillStats(skipped=f"error: {exc}")

    async def distill(self, exchange: Exchange) -> DistillStats:
        if not self.should_distill(exchange):
            return DistillStats(skipped="off")
        return await self._extract(
            _render(exchange),
            exchange.chat,
            exchange.label,
            source="distiller",
            max_tokens=EXCHANGE_MAX_TOKENS,
            speaker=exchange.speaker,
            sources=exchange.message_ids,
            said_at=exchange.said_at,
        )

    async def distill_transcript(self, transcript: Transcript, *, source: str = "compaction") -> DistillStats:
        """Extract and save the facts of ``transcript`` now (write-then-compact), waiting for the chat's turn.

        Unlike per-exchange distilling this does not depend on ``enabled``: compaction discards messages,
        and what they held must be saved first. Messages switched off with #nomem are left out.
        """
        messages = without_off_switched(transcript.messages)
        if not any(is_user_turn(m) for m in messages):
            return DistillStats(skipped="nothing to distil")
        text, lines = numbered_transcript(messages)
        where = _where(transcript.chat, transcript.label)
        async with self._locks.hold(transcript.chat.id):
            return await self._extract(
                f"{TRANSCRIPT_HEADER} in {where} before it leaves the context window:\n\n{text}",
                transcript.chat,
                transcript.label,
                source=source,
                max_tokens=TRANSCRIPT_MAX_TOKENS,
                speaker=label_speaker(transcript.label),
                lines=lines,
            )

    async def _extract(
        self,
        content: str,
        chat: ChatInfo,
        label: str,
        *,
        source: str,
        max_tokens: int,
        speaker: str,
        sources: tuple[int, ...] = (),
        said_at: float | None = None,
        lines: Mapping[int, tuple[int, int, float]] | None = None,
    ) -> DistillStats:
        stats = DistillStats()
        known = await self.facts.related(content[-KNOWN_QUERY_CHARS:], [label], limit=KNOWN_FACTS)
        try:
            response = await self.llm.create(
                system=SYSTEM,
                messages=[{"role": "user", "content": content + _render_known(known)}],
                tools=[TOOL],
                tool_choice={"type": "tool", "name": TOOL_NAME},
                model=self.llm.settings.utility_model,
                max_tokens=max_tokens,
                temperature=0.0,
            )
        except LLMError as exc:
            stats.skipped = f"model unavailable: {exc}"
            log.warning("memory.commit_skipped", chat_id=chat.id, reason=stats.skipped)
            if self.on_error is not None:  # `teleton status` shows why memory stopped growing
                self.on_error(exc)
            return stats
        items = _facts_of(response.tool_uses)
        if items is None:
            stats.dropped += 1
            items = []
        members = (
            await self.facts.db.read(lambda conn: chat_members(conn, chat.id, self.principals.owner_id))
            if chat.type != "dm"
            else {}
        )
        shown = frozenset(f.id for f in known)
        where = _Where(label, source, speaker, chat.id, members, shown, sources, said_at, lines or {})
        for item in items:
            await self._commit_one(item, where, stats)
        self._account(chat.id, source, stats)
        return stats

    async def _commit_one(self, item: Any, where: _Where, stats: DistillStats) -> None:
        try:
            jsonschema.validate(item, FACT_SCHEMA)
        except jsonschema.ValidationError:
            stats.dropped += 1
            return
        label = where.label
        replaces = item.get("replaces")
        sources, said_at = where.of(item)
        fact = Fact(
            value=dated(" ".join(item["content"].split()), said_at),
            category=item["category"].strip().lower(),
            key=(item.get("key") or None),
            scope=label,
            source=where.source,
            importance=float(item["importance"]),
            subject=resolve(item.get("about"), where.speaker, where.chat_id, where.members),
            # Only a fact the model was shown: an id it made up (or was told by a message) ends nothing.
            replaces=replaces if replaces in where.shown else None,
            said_by=where.speaker or where.label,  # a group's transcript speaks for nobody in particular
        )
        outcome = await save_merging(self.facts, fact, self.near_duplicate)
        if sources:  # found here, whether new, updated or known already
            await self.facts.db.write(lambda conn: link(conn, outcome.id, where.chat_id, sources))
        kind = _label_kind(label)
        if outcome.action == "superseded":
            stats.superseded += 1
            log.info("memory.fact_updated", old=outcome.replaced, new=outcome.id, reason=item.get("reason") or "")
        if outcome.action in ("inserted", "superseded"):
            stats.saved[kind] += 1
        elif outcome.action == "updated":
            stats.updated[kind] += 1
        else:
            stats.duplicates += 1
        if outcome.action != "duplicate":
            stats.kept.append(fact)
        if item.get("correction") and self.learnings is not None and label == OWNER:
            if await self.learnings.record_correction(fact.value):
                stats.corrections += 1

    def _account(self, chat_id: int, source: str, stats: DistillStats) -> None:
        self.totals.saved.update(stats.saved)
        self.totals.updated.update(stats.updated)
        self.totals.superseded += stats.superseded
        self.totals.duplicates += stats.duplicates
        self.totals.dropped += stats.dropped
        self.totals.corrections += stats.corrections
        log.info(
            "memory.commit",
            chat_id=chat_id,
            source=source,
            saved=dict(stats.saved),
            updated=dict(stats.updated),
            superseded=stats.superseded,
            duplicates=stats.duplicates,
            dropped=stats.dropped,
            corrections=stats.corrections,
        )
        self._malformed_streak = self._malformed_streak + 1 if stats.dropped else 0
        if self._malformed_streak >= QUALITY_WARNING_STREAK:
            log.warning("memory.quality_warning", malformed_reject_streak=self._malformed_streak)


def _facts_of(tool_uses: list[dict[str, Any]]) -> list[Any] | None:
    for block in tool_uses:
        if block.get("name") == TOOL_NAME:
            facts = (block.get("input") or {}).get("facts")
            return facts if isinstance(facts, list) else None
    return None


def without_off_switched(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without each user turn carrying #nomem and what answered it (up to the next user turn).
    Pure: the off switch holds for transcripts as it does for single exchanges."""
    kept: list[Message] = []
    skipping = False
    for message in messages:
        if is_user_turn(message):
            skipping = bool(OFF_SWITCH.search(_text_of(message)))
        if not skipping:
            kept.append(message)
    return kept


def _text_of(message: Message) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def _where(chat: ChatInfo, label: str) -> str:
    where = "a private chat with the owner" if label == OWNER else f"the {chat.type} chat"
    return where + (f" '{chat.title}'" if chat.title else "")


def _render(exchange: Exchange) -> str:
    on = f" on {datetime.fromtimestamp(exchange.said_at):%A %d %B %Y}" if exchange.said_at is not None else ""
    return (
        f"Exchange in {_where(exchange.chat, exchange.label)}{on}:\n\n"
        f"{exchange.user_name}: {excerpt(exchange.user_text, EXCHANGE_CHARS)}\n\n"
        f"Assistant: {excerpt(exchange.assistant_text, EXCHANGE_CHARS)}"
    )


def _render_known(known: Sequence[StoredFact]) -> str:
    if not known:
        return ""
    lines = "\n".join(f"- id {f.id}: [{f.category}/{f.key or '-'}] {f.value}" for f in known)
    return f"\n\nFacts already remembered here (use `replaces` with the id when one has changed):\n{lines}"
