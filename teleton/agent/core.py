"""What every stage and command of the agent shares: its services and the state it keeps per chat and session.

``runtime.Agent`` is this plus the stage list. A stage (``stages/``) or a command (``commands/``) takes the
turn and this object, never the runtime, so no part of a turn calls back into the pipeline that runs it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from teleton.agent.compactor import Compactor
from teleton.agent.deps import AgentDeps, AgentSettings
from teleton.agent.locks import KeyedLocks
from teleton.agent.prompt.budget import stable_cap
from teleton.agent.prompt.retrieval import ContextBuilder
from teleton.agent.prompt.system import PromptBuilder
from teleton.agent.turn import Turn, required
from teleton.agent.turn_stats import LastTurns
from teleton.agent.window.sessions import Session, SessionStore, expiry_reason
from teleton.gateway.contract import Thread, UserInfo
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.tools.rag import StickyPicks
from teleton.tools.registry import ToolDeps


class AgentCore:
    def __init__(self, deps: AgentDeps, settings: AgentSettings | None = None) -> None:
        self.deps = deps
        self.settings = settings = settings or AgentSettings()
        self.daily_logs = deps.daily_logs or DailyLogs(Path(deps.workspace) / "memory")
        self.principals = deps.principals
        self.sessions = SessionStore(deps.db)
        self.context = ContextBuilder(deps.db, deps.embedder, settings.context, self.principals, deps.reranker)
        self.prompt = PromptBuilder(
            deps.workspace,
            self.daily_logs,
            deps.facts,
            owner=deps.owner,
            me=lambda: deps.gateway.me,
            daily_log_lines=settings.daily_log_lines,
            salience_threshold=settings.salience_threshold,
            learnings=deps.learnings,
            principals=self.principals,
            shared=deps.shared_paths,
            stable_budget=stable_cap(settings.memory_budget, settings.memory_stable_share),
            surface=deps.surface,
            skills=deps.skills,
        )
        self.compactor = Compactor(
            deps.db, deps.llm, self.sessions, self.daily_logs, deps.facts, knowledge=deps.knowledge,
            distiller=deps.distiller,
        )  # fmt: skip
        self.tool_deps = ToolDeps(
            db=deps.db,
            workspace=Path(deps.workspace),
            gateway=deps.gateway,
            facts=deps.facts,
            daily_logs=self.daily_logs,
            knowledge=deps.knowledge,
            embedder=deps.embedder,
            principals=self.principals,
            shared_paths=deps.shared_paths,
            outbox=deps.outbox,
            learnings=deps.learnings,
            search=settings.context.params,
            reranker=deps.reranker,
            rerank_candidates=settings.context.rerank_candidates,
            scheduler=deps.scheduler,
            chat_history=deps.chat_history,
            skills=deps.skills,
        )
        if deps.outbox is not None:  # what the owner approves is carried out by the tool that held it
            deps.outbox.attach(deps.registry.tools(), self.tool_deps)
        self.paused = False
        self.locks = KeyedLocks()  # one turn at a time per conversation (a chat, or a forum topic)
        self.running: dict[Thread, asyncio.Task[None]] = {}  # its turn now (for /stop)
        self.flushed: set[str] = set()  # sessions already told to flush (once per session)
        # session id -> the session's tool list, which only grows, for the most recently active sessions
        self.offered = StickyPicks()
        self.turns = 0
        self.daily_log_failing = False
        self.last_timings: dict[str, float] = {}  # stage timings of the last finished turn (bench, /status)
        self.last_turns = LastTurns()  # memory tokens and cache figures per chat (/status)

    def is_admin(self, user: UserInfo | None) -> bool:
        """A control right (commands, policies, tool settings), never a read right."""
        return user is not None and self.principals.is_admin(user.id)

    def stop(self, thread: Thread) -> bool:
        """Cancel the running turn of a chat or topic (/stop). Messages queued behind it still run."""
        task = self.running.get(thread)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def expiry(self, session: Session | None) -> str | None:
        if session is None:
            return None
        return expiry_reason(
            session, time.time(), reset_hour=self.settings.session_reset_hour,
            idle_minutes=self.settings.session_idle_minutes,
        )  # fmt: skip

    def forget(self, session_id: str) -> None:
        """Drop per-session state of a session that ended (the daemon runs for months)."""
        self.flushed.discard(session_id)
        self.offered.forget(session_id)

    async def swap(self, turn: Turn, old: Session, change: Callable[[], Awaitable[Session]]) -> None:
        """Replace the turn's session by what ``change`` returns; shielded from /stop (``runtime``'s pipeline
        waits for it before keeping the stopped exchange)."""

        async def swap() -> None:
            turn.session = await change()
            self.forget(old.id)

        turn.swapping = asyncio.ensure_future(swap())
        await asyncio.shield(turn.swapping)

    async def compact(self, turn: Turn, keep: int) -> None:
        """Compact the turn's session mid-turn, keeping the last ``keep`` messages."""
        old = required(turn.session)

        async def compact() -> Session:
            return (await self.compactor.compact(old, turn.clearance, keep)).session

        await self.swap(turn, old, compact)

    def report(self, kind: str, error: BaseException | str) -> None:
        """A model or Telegram failure for the status file (``teleton status``)."""
        if self.deps.report is not None:
            self.deps.report(kind, error)
