"""Write-then-compact (docs/memory.md): nothing leaves the context window unsaved.

Before old messages are discarded: (1) the distiller extracts durable facts from them, through the same
structured path as after every exchange (tool use with a JSON schema, per-fact validation, the scope rules,
near-duplicate merge), and they are saved; (2) the utility model summarises the old part; (3) the summary
goes to the daily log and to the knowledge base (``source=session``), both under the session's label (its
chat's: a group's summary is the group's, quoted in the owner's log); (4) the session ends and a new one
(new ID) starts from the summary and the kept tail. When the model is unavailable, a truncation summary
(the user's own words, cut short) stands in, so compaction never fails because the model did.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

import structlog

from teleton.agent.distiller import Distiller, Transcript
from teleton.agent.messages import archived_chat
from teleton.agent.privacy import origin
from teleton.agent.steering import steering_of, unsteered
from teleton.agent.window import compaction
from teleton.agent.window.sessions import Session, SessionStore
from teleton.gateway.contract import ChatInfo
from teleton.llm.client import LLMClient, LLMError
from teleton.memory.facts.store import FactStore
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.knowledge.rows import store_entry
from teleton.privacy import Clearance
from teleton.privacy.quoting import mark
from teleton.storage.database import Database
from teleton.text.tokens import estimate_tokens

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Closed:
    summary: str
    successor: Session | None  # the chat's new (empty) session, when one was asked for


@dataclass(frozen=True)
class CompactionOutcome:
    session: Session  # the session to continue with (new after a compaction)
    summary: str
    dropped: int
    facts_saved: int
    fell_back: bool  # True when the summary is a truncation (model unavailable)


@dataclass(eq=False)
class Compactor:
    db: Database
    llm: LLMClient
    sessions: SessionStore
    daily_logs: DailyLogs
    facts: FactStore | None
    _: KW_ONLY
    knowledge: KnowledgeIndex | None = None
    # The daemon's distiller when given (its per-chat commits then serialise with ours), else our own.
    distiller: Distiller | None = None

    def __post_init__(self) -> None:
        if self.distiller is None and self.facts is not None:
            self.distiller = Distiller(self.llm, self.facts)

    async def compact(
        self, session: Session, clearance: Clearance, keep_last: int, reason: str = "compacted"
    ) -> CompactionOutcome:
        """Summarise all but the last ``keep_last`` messages into a new session."""
        old, kept = compaction.split(session.messages, keep_last)
        if not old:
            return CompactionOutcome(session, session.summary, 0, 0, False)
        saved, summary, fell_back = await self._preserve(session, old, clearance, f"Session compacted ({reason})")
        # One transaction: a crash can never leave the chat with no session, or with two.
        new = await self.sessions.replace(
            session,
            reason,
            summary,
            carried=summary,
            messages=kept,
            last_input_tokens=estimate_tokens([summary, kept]),
        )
        log.info(
            "session_compacted",
            chat_id=session.chat_id,
            dropped=len(old),
            kept=len(kept),
            old_session=session.id,
            new_session=new.id,
            fallback=fell_back,
            facts=saved,
        )
        return CompactionOutcome(new, summary, len(old), saved, fell_back)

    async def close(self, session: Session, clearance: Clearance, reason: str, *, successor: bool = False) -> Closed:
        """End a session for good (/new, daily reset, idle expiry), saving what it held first; with
        ``successor`` the chat's next session is created in the same transaction as the end."""
        summary = ""
        if any(compaction.is_user_turn(m) for m in session.messages):
            _, summary, _ = await self._preserve(session, session.messages, clearance, f"Session ended ({reason})")
        new = None
        if successor:
            new = await self.sessions.replace(session, reason, summary)
        else:
            await self.sessions.end(session, reason, summary)
        log.info("session_ended", chat_id=session.chat_id, session=session.id, reason=reason)
        return Closed(summary, new)

    async def flush(self, session: Session, clearance: Clearance) -> int:
        """The soft-threshold memory flush: save facts of the session so far, note it in the daily log."""
        chat = await self._chat(session.chat_id)
        saved, lines = await self._extract_facts(chat, session.messages, clearance)
        body = "\n".join(f"- {line}" for line in lines) or "(no new facts)"
        await self._log_section("Memory flush", body, origin(chat, clearance, topic=session.topic_id))
        return saved

    async def _preserve(
        self, session: Session, old: list[dict[str, Any]], clearance: Clearance, title: str
    ) -> tuple[int, str, bool]:
        chat = await self._chat(session.chat_id)
        saved, _ = await self._extract_facts(chat, old, clearance)  # write first ...
        try:
            summary = await self.llm.complete(compaction.summary_prompt(old, session.summary), max_tokens=600)
            fell_back = not summary.strip()
        except LLMError as exc:
            log.warning("summary_failed", error=str(exc))
            summary, fell_back = "", True
        if fell_back:
            summary = compaction.truncation_summary(old)
        # A summary of words from elsewhere keeps their origin wherever it goes (log, knowledge, next session).
        summary = mark(summary, steering_of(old, clearance.label, session.summary))
        await self._log_section(title, summary, origin(chat, clearance, topic=session.topic_id))  # ... then compact
        await self._to_knowledge(session, summary, clearance.label)
        return saved, summary, fell_back

    async def _extract_facts(
        self, chat: ChatInfo, messages: list[dict[str, Any]], clearance: Clearance
    ) -> tuple[int, list[str]]:
        """Save the facts of ``messages``; returns how many were stored (new or updated) and their lines."""
        if self.distiller is None:
            return 0, []
        # Only the exchanges nothing steered: a planted "fact" never becomes this label's memory.
        own = unsteered(messages, clearance.label)
        stats = await self.distiller.distill_transcript(Transcript(chat, own, label=clearance.label))
        return len(stats.kept), [f"[{fact.category}] {fact.value}" for fact in stats.kept]

    async def _chat(self, chat_id: int) -> ChatInfo:
        return await archived_chat(self.db, chat_id)

    async def _log_section(self, title: str, body: str, where: str | None) -> None:
        try:
            await self.daily_logs.append_section(title, body, origin=where)
        except OSError as exc:  # a full disk must not stop the conversation
            log.warning("daily_log_write_failed", error=repr(exc))

    async def _to_knowledge(self, session: Session, summary: str, label: str) -> None:
        path = f"sessions/{session.chat_id}/{session.id}"
        # Both store the row before anything else (``rows.store_entry``): an embedder that fails leaves it
        # keyword-searchable, to be embedded later.
        try:
            if self.knowledge is not None:
                await self.knowledge.add_entry(summary, source="session", path=path, label=label)
            else:
                await store_entry(self.db, summary, source="session", path=path, label=label)
        except Exception as exc:
            log.warning("session_summary_to_knowledge_failed", error=repr(exc))
