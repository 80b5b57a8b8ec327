"""The agent runtime: one turn as an explicit, ordered pipeline of small async stages.

    handle(msg)
      commands        slash commands answer directly (``/stop`` even while a turn runs)
      session         the chat's session; daily reset / idle expiry end it with a summary first
      compaction      hard threshold -> write-then-compact; soft threshold -> memory flush
      context         privacy-gated RAG blocks + the system prompt, memory within its budget (``memory_budget``)
      answer          the tool loop (overflow -> compact and one retry)   (``answering``)
      reply           the final text goes to the chat unless a send tool already spoke (``answering``)
      persist         observation masking, session saved, daily-log line (``aftercare``)

The read path (context) runs before the write path (persist), so the model sees memory as it was before
this exchange. Turns of one chat run one at a time; different chats run in parallel. Around the reply the
turn's delivery record is written (``delivery``): sending before the first word goes out, then answered or
failed with a reason, so a restart answers what was accepted and never answers anything twice. A session
swap (compaction, expiry) always completes under the chat's lock, even when the turn is stopped meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from teleton.agent.commands.slash import command_of, run_command
from teleton.agent.compactor import Compactor
from teleton.agent.delivery.records import Delivery, MessageDelivery, finish
from teleton.agent.deps import AgentDeps, AgentSettings, load_owner
from teleton.agent.locks import KeyedLocks
from teleton.agent.messages import quoted_referent, user_text
from teleton.agent.scheduled import ScheduledTurns
from teleton.agent.stages import aftercare, answering, memory_budget
from teleton.agent.stages.context import ContextBuilder
from teleton.agent.stages.media_reading import read_media
from teleton.agent.stages.prompt import PromptBuilder, PromptInputs, SystemParts
from teleton.agent.stages.voice_reply import speak_reply
from teleton.agent.steering import shown
from teleton.agent.turn import Turn, required
from teleton.agent.window import oversize
from teleton.agent.window.compaction import needs_hard, needs_soft
from teleton.agent.window.sessions import Session, SessionStore, expiry_reason
from teleton.gateway.contract import IncomingMessage, TurnDeferred, UserInfo
from teleton.memory.feed import archive as fa
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.privacy import Clearance, Taint
from teleton.privacy.quoting import outside
from teleton.storage.database import storage_fault
from teleton.tools.rag import StickyPicks
from teleton.tools.registry import ToolDeps

__all__ = ["Agent", "AgentDeps", "AgentSettings"]

log = structlog.get_logger(__name__)

FLUSH_NOTE = (
    "## Memory flush\nThis conversation has filled half of your context window and will be compacted "
    "soon. Before answering, save anything worth keeping with memory_save (facts) or memory_write (notes)."
)


class Agent:
    def __init__(self, deps: AgentDeps, settings: AgentSettings | None = None) -> None:
        self.deps = deps
        self.settings = settings = settings or AgentSettings()
        self.daily_logs = deps.daily_logs or DailyLogs(Path(deps.workspace) / "memory")
        self.principals = deps.principals
        self.sessions = SessionStore(deps.db)
        self.context = ContextBuilder(deps.db, deps.embedder, settings.context, self.principals)
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
            stable_budget=memory_budget.stable_cap(settings.memory_budget, settings.memory_stable_share),
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
            scheduler=deps.scheduler,
        )
        if deps.outbox is not None:  # what the owner approves is carried out by the tool that held it
            deps.outbox.attach(deps.registry.tools(), self.tool_deps)
        self.scheduled = ScheduledTurns(self)
        self.paused = False
        self.locks = KeyedLocks()  # one turn at a time per chat
        self._running: dict[int, asyncio.Task[None]] = {}
        self._flushed: set[str] = set()  # sessions already told to flush (once per session)
        # session id -> tools offered so far (sticky tool RAG), for the most recently active sessions
        self._offered = StickyPicks()
        self.turns = 0
        self.daily_log_failing = False
        self.last_timings: dict[str, float] = {}  # stage timings of the last finished turn (bench, /status)
        self.last_turns = memory_budget.LastTurns()  # memory tokens and cache figures per chat (/status)

    # -- entry points ---------------------------------------------------------------------------------
    def is_admin(self, user: UserInfo | None) -> bool:
        """A control right (commands, policies, tool settings), never a read right."""
        return user is not None and self.principals.is_admin(user.id)

    def wants_immediate(self, msg: IncomingMessage) -> bool:
        """True for messages a per-chat queue must deliver at once, not behind the running turn (/stop)."""
        found = command_of(msg)
        return found is not None and found[0].name == "stop"

    async def handle(self, msg: IncomingMessage, *, silent_token: str | None = None) -> str | None:
        """Handle one accepted message; returns the text sent in reply (None when nothing was sent)."""
        turn = await self.handle_turn(msg, silent_token=silent_token)
        return (turn.reply or None) if turn is not None and not turn.undelivered else None

    async def handle_turn(
        self,
        msg: IncomingMessage,
        *,
        silent_token: str | None = None,
        clearance: Clearance | None = None,
        is_admin: bool | None = None,
        delivery: Delivery | None = None,
        from_task: bool = False,
        taint: Taint | None = None,
    ) -> Turn | None:
        """One turn, its delivery record kept from acceptance to answer.

        The clearance is the chat's (the owner's DM reads everything, any other chat its own label and
        public items); a scheduled turn passes the clearance, rights and taint of the turn that created it.
        A turn cancelled by shutdown leaves its messages accepted: the next start answers them.
        """
        clearance = clearance or self.principals.clearance(msg.chat.id)
        seen = Taint({clearance.label})  # its own chat and session
        if taint is not None:
            seen.merge(taint)
        if msg.forwarded_from:  # someone else's words, brought in by the sender
            seen.saw(outside("forward", msg.forwarded_from))
        turn = Turn(
            msg=msg,
            is_admin=self.is_admin(msg.sender) if is_admin is None else is_admin,
            clearance=clearance,
            taint=seen,
            delivery=delivery or MessageDelivery(self.deps.db, msg.chat.id, msg.answers),
            silent_token=silent_token,
            from_task=from_task,
            typed="" if from_task or msg.forwarded_from else msg.text,
        )
        found = command_of(msg)
        if found is not None:
            await run_command(self, turn, *found)
        elif self.paused and not turn.is_admin:
            log.info("paused_ignored", chat_id=msg.chat.id)
            await finish(turn.delivery, turn.msg.chat.id, fa.STATE_IGNORED, "paused")
            return None
        else:
            async with self.locks.hold(msg.chat.id):
                if not await self._run_pipeline(turn):
                    return turn
        await finish(turn.delivery, turn.msg.chat.id, *answering.outcome(turn))
        return turn

    async def _run_pipeline(self, turn: Turn) -> bool:
        """False when the turn was stopped (/stop): its record says so, and nothing more is due."""
        chat_id = turn.msg.chat.id
        task = asyncio.create_task(self._pipeline(turn), name=f"turn-{chat_id}-{turn.msg.message_id}")
        self._running[chat_id] = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we are being cancelled (shutdown), not /stop: the messages stay accepted
            log.info("turn_stopped", chat_id=chat_id)
            await finish(turn.delivery, turn.msg.chat.id, fa.STATE_FAILED, "stopped by the user")
            return False
        except Exception as exc:
            fault = storage_fault(exc)
            if fault is not None:  # not the message's fault: it is answered once the disk takes writes again
                raise TurnDeferred(fault) from exc
            await finish(turn.delivery, turn.msg.chat.id, fa.STATE_FAILED, f"error: {type(exc).__name__}: {exc}"[:300])
            raise
        finally:
            self._running.pop(chat_id, None)
        return True

    async def run_scheduled(self, chat_id: int, text: str, **kwargs: Any) -> str | None:
        return await self.scheduled.run(chat_id, text, **kwargs)

    async def refresh_owner(self) -> None:
        """After SIGHUP: the owner shown in prompts follows ``principals``."""
        self.prompt.owner = await load_owner(self.deps.db, self.principals.owner_id)

    def stop(self, chat_id: int) -> bool:
        """Cancel the running turn of a chat (/stop). Messages queued behind it still run."""
        task = self._running.get(chat_id)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def shutdown(self, grace_s: float = 5.0) -> None:
        """Let running turns finish for ``grace_s``, then cancel them (SIGTERM); then let the distiller finish."""
        tasks = [t for t in self._running.values() if not t.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self.deps.distiller is not None:
            try:
                await asyncio.wait_for(self.deps.distiller.drain(), timeout=grace_s)
            except TimeoutError:
                log.warning("distiller_not_drained", grace_s=grace_s)

    # -- the pipeline ---------------------------------------------------------------------------------
    async def _pipeline(self, turn: Turn) -> None:
        stages = (
            ("media", lambda t: read_media(self.deps.media, t)),
            ("session", self._stage_session),
            ("compaction", self._stage_compaction),
            ("context", self._stage_context),
            ("answer", lambda t: answering.answer(self, t)),
            ("reply", lambda t: answering.deliver(self, t)),
            ("voice", lambda t: speak_reply(self.deps.voice, t)),
            ("persist", lambda t: aftercare.persist(self, t)),
        )
        try:
            for name, stage in stages:
                began = time.monotonic()
                await stage(turn)
                turn.timings[name] = round((time.monotonic() - began) * 1000, 1)
        except asyncio.CancelledError:
            if turn.swapping is not None and not turn.swapping.done():
                # A stop mid-compaction: the swap finishes first, so the stopped exchange is kept in the
                # session that follows, never in the one just retired.
                await asyncio.wait([turn.swapping])
            await asyncio.shield(aftercare.persist_stopped(self, turn))
            raise
        self.turns += 1
        self.last_timings = turn.timings
        if turn.memory is not None and turn.result is not None:
            self.last_turns.record(turn.msg.chat.id, memory_budget.TurnStats(turn.memory, turn.result.usage))
        log.info(
            "turn_done",
            chat_id=turn.msg.chat.id,
            ms=round((time.monotonic() - turn.started) * 1000),
            iterations=turn.result.iterations if turn.result else 0,
            failed=bool(turn.failed or turn.undelivered),
            stages=turn.timings,
        )

    async def _swap(self, turn: Turn, old: Session, change: Callable[[], Awaitable[Session]]) -> None:
        """Replace the turn's session by what ``change`` returns; shielded from /stop (see ``_pipeline``)."""

        async def swap() -> None:
            turn.session = await change()
            self.forget(old.id)

        turn.swapping = asyncio.ensure_future(swap())
        await asyncio.shield(turn.swapping)

    def expiry(self, session: Session | None) -> str | None:
        if session is None:
            return None
        return expiry_reason(
            session, time.time(), reset_hour=self.settings.session_reset_hour,
            idle_minutes=self.settings.session_idle_minutes,
        )  # fmt: skip

    async def _stage_session(self, turn: Turn) -> None:
        limit = self.settings.max_input_chars
        fitted = await oversize.fit(Path(self.deps.workspace), turn.msg, limit)
        if fitted is not turn.msg:  # kept whole in a file; everything after this reads the excerpt
            turn.msg = fitted
            log.info("long_message_shortened", chat_id=turn.msg.chat.id, kept_chars=limit)
        # The user's words first: a /stop during the session swap below still keeps them (persist_stopped).
        text = user_text(turn.msg, await quoted_referent(self.deps.db, turn.msg))
        turn.stored_user = {"role": "user", "content": text}
        chat_id = turn.msg.chat.id
        session = await self.sessions.active(chat_id)
        reason = self.expiry(session)
        if session is not None and reason:
            old = session

            async def close() -> Session:
                closed = await self.compactor.close(old, turn.clearance, reason, successor=True)
                return required(closed.successor)

            await self._swap(turn, old, close)
            return
        turn.session = session or await self.sessions.create(chat_id)

    async def _stage_compaction(self, turn: Turn) -> None:
        session = required(turn.session)
        t = self.settings.thresholds
        if needs_hard(len(session.messages), session.last_input_tokens, t):
            await self.compact(turn, t.keep_last)
        elif needs_soft(session.last_input_tokens, t) and session.id not in self._flushed:
            self._flushed.add(session.id)
            await self.compactor.flush(session, turn.clearance)
            turn.flush_note = FLUSH_NOTE

    async def compact(self, turn: Turn, keep: int) -> None:
        """Compact the turn's session mid-turn, keeping the last ``keep`` messages."""
        old = required(turn.session)

        async def compact() -> Session:
            return (await self.compactor.compact(old, turn.clearance, keep)).session

        await self._swap(turn, old, compact)

    async def _stage_context(self, turn: Turn) -> None:
        msg = turn.msg
        selector = self.deps.tool_selector

        async def pick_tools(vector: Any) -> Sequence[str] | None:
            # Tool RAG shares the message's one query embedding with memory retrieval.
            if selector is None:
                return None
            return await selector(msg.text, vector, msg.chat, turn.is_admin, turn.clearance.is_owner)

        # Retrieval, tool choice and the system prompt do not depend on each other: built concurrently.
        turn.rag, parts = await asyncio.gather(
            self.context.build(msg, turn.clearance, pick_tools), self.prompt.parts(self._prompt_inputs(turn))
        )
        self._fit_memory(turn, parts)
        names = self._offered.offer(required(turn.session).id, turn.rag.extra)
        turn.tools = self.deps.registry.schemas(msg.chat, turn.is_admin, names, is_owner=turn.clearance.is_owner)

    def forget(self, session_id: str) -> None:
        """Drop per-session state of a session that ended (the daemon runs for months)."""
        self._flushed.discard(session_id)
        self._offered.forget(session_id)

    async def build_system(self, turn: Turn) -> None:
        """After a compaction mid-turn: the summary changed, and with it what is left for the rest."""
        self._fit_memory(turn, await self.prompt.parts(self._prompt_inputs(turn)))

    def _prompt_inputs(self, turn: Turn) -> PromptInputs:
        return PromptInputs(
            chat=turn.msg.chat,
            sender=turn.msg.sender,
            clearance=turn.clearance,
            taint=turn.taint,
            summary=required(turn.session).summary,
            flush_note=turn.flush_note,
        )

    def _fit_memory(self, turn: Turn, parts: SystemParts) -> None:
        """The system prompt and the user message with what of the turn's memory fits its budget."""
        budget = self.settings.memory_budget
        allowance = None if budget is None else max(0, budget - parts.stable.total)
        label = turn.clearance.label
        plan = memory_budget.plan_turn(required(turn.rag), parts.days, turn.msg.text, label, allowance)
        turn.system = self.prompt.assemble(parts, plan.days)
        turn.taint.add(*plan.rag.labels())  # what is shown, not what was found
        turn.taint.saw(*plan.rag.origins())
        turn.memory = parts.stable.plus(plan.usage, budget)
        memory_budget.log_left_out(turn.msg.chat.id, turn.memory)
        text = required(turn.stored_user)["content"]
        rag_text = plan.rag.render(label)
        shown(turn.taint, [block["text"] for block in turn.system], rag_text, text, required(turn.session).messages)
        blocks = [{"type": "text", "text": rag_text}] if rag_text else []
        # The image is seen in this request only; the session keeps the line that describes it.
        blocks += [*turn.images, {"type": "text", "text": text}]
        turn.sent_user = turn.stored_user if len(blocks) == 1 else {"role": "user", "content": blocks}

    def report(self, kind: str, error: Any) -> None:
        """A model or Telegram failure for the status file (``teleton status``)."""
        if self.deps.report is not None:
            self.deps.report(kind, error)
