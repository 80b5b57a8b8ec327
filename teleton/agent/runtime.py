"""The agent runtime: one turn as an explicit, ordered pipeline of small async stages.

    handle(msg)
      commands        slash commands answer directly (``/stop`` even while a turn runs)
      session         the chat's session; daily reset / idle expiry end it with a summary first
      compaction      hard threshold -> write-then-compact; soft threshold -> memory flush
      context         privacy-gated RAG blocks + the system prompt
      answer          the tool loop (overflow -> compact and one retry)
      reply           the final text goes to the chat unless a send tool already spoke
      persist         observation masking, session saved, daily-log line

The read path (context) runs before the write path (persist), so the model sees memory as it was before
this exchange. Turns of one chat run one at a time; different chats run in parallel.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from teleton.agent.commands import CommandSpec, PolicyControl, command_of
from teleton.agent.compactor import CompactionOutcome, Compactor
from teleton.agent.context import ContextBuilder, ContextSettings, RagContext
from teleton.agent.messages import sender_label, split_message, spoke_here, user_text
from teleton.agent.privacy import origin, task_origin
from teleton.agent.prompt import PromptBuilder, PromptInputs
from teleton.agent.sessions import Session, SessionStore, expiry_reason
from teleton.gateway.contract import ChatInfo, Gateway, IncomingMessage, UserInfo
from teleton.llm.client import ContextOverflowError, LLMClient, LLMError, Message
from teleton.llm.tool_loop import LoopLimits, LoopResult, ToolCall, ToolResult, run_tool_loop
from teleton.memory.compaction import Thresholds, needs_hard, needs_soft
from teleton.memory.daily_logs import DailyLogs
from teleton.memory.facts import FactStore
from teleton.memory.hybrid_search import SearchParams
from teleton.memory.observation_masking import mask_observations
from teleton.privacy import Clearance, Exposure, Principals
from teleton.scheduler.scheduler import NotNow, archived_chat
from teleton.storage.database import Database
from teleton.tools.registry import ToolContext, ToolDeps, ToolRegistry

log = structlog.get_logger(__name__)

# Tools that speak in the chat themselves; when the model used one, its final text is not sent again.
SEND_TOOLS = frozenset({"send_message", "reply", "telegram_send_message", "telegram_reply"})
UNAVAILABLE = "Sorry — I can't reach my language model right now. Please try again in a moment."
STICKY_TOOLS_MAX = 40
TOO_LONG = "That is more than I can read at once, even after compacting. Try a shorter message, or /new."
FLUSH_NOTE = (
    "## Memory flush\nThis conversation has filled half of your context window and will be compacted "
    "soon. Before answering, save anything worth keeping with memory_save (facts) or memory_write (notes)."
)

# (query, query vector, chat, is_admin) -> names of the tools to offer, or None for all allowed ones.
ToolSelector = Callable[[str, Any, ChatInfo, bool], Awaitable[Sequence[str] | None]]
# (chat id, principal id) -> None when a scheduled turn may run now, else which rate limit it hit.
RateCheck = Callable[[int, int | None], str | None]


@dataclass(frozen=True)
class AgentSettings:
    limits: LoopLimits = field(default_factory=LoopLimits)
    thresholds: Thresholds = field(default_factory=Thresholds)
    context: ContextSettings = field(default_factory=ContextSettings)
    masking_keep: int = 10
    daily_log_lines: int = 100
    salience_threshold: float = 0.85
    session_reset_hour: int | None = 4
    session_idle_minutes: int | None = 720
    send_tools: frozenset[str] = SEND_TOOLS

    @classmethod
    def from_config(cls, config: Any) -> AgentSettings:
        """From a ``teleton.config.schema.Config``."""
        a, m = config.agent, config.memory
        return cls(
            limits=LoopLimits(a.max_iterations, a.tool_timeout_s, a.tool_output_cap),
            thresholds=Thresholds(
                a.context_window, m.soft_threshold, m.hard_threshold, m.hard_max_messages, m.keep_last
            ),
            context=ContextSettings(
                recent=m.context_recent,
                knowledge=m.context_knowledge,
                feed=m.context_feed,
                params=SearchParams(
                    vector_weight=m.vector_weight,
                    keyword_weight=m.keyword_weight,
                    vector_candidates=m.vector_candidates,
                    keyword_candidates=m.vector_candidates,
                    limit=m.result_limit,
                    min_score=m.min_score,
                ),
            ),
            masking_keep=m.masking_keep,
            daily_log_lines=m.daily_log_lines,
            salience_threshold=m.salience_threshold,
            session_reset_hour=m.session_reset_hour,
            session_idle_minutes=m.session_idle_minutes,
        )


@dataclass
class AgentDeps:
    """What the daemon (or ``teleton chat``) injects."""

    db: Database
    llm: LLMClient
    gateway: Gateway
    registry: ToolRegistry
    workspace: Path
    facts: FactStore | None = None
    daily_logs: DailyLogs | None = None
    embedder: Any = None  # EmbeddingProvider or None (keyword-only)
    knowledge: Any = None  # KnowledgeIndex or None
    policy: PolicyControl | None = None
    tool_selector: ToolSelector | None = None
    owner: UserInfo | None = None
    distiller: Any = None  # teleton.agent.distiller.Distiller: facts from each exchange, in the background
    learnings: Any = None  # teleton.memory.learnings.Learnings: tool errors and corrections for the DM prompt
    principals: Principals = field(default_factory=Principals)  # owner and admins: the one shared source
    outbox: Any = None  # teleton.tools.outbox.Outbox: sends to other chats (held for approval when needed)
    shared_paths: tuple[str, ...] = ()  # privacy.shared_paths
    rate_check: RateCheck | None = None  # the gateway's rate limiter, for scheduled turns


@dataclass
class Turn:
    """Everything one turn builds up as it passes the stages."""

    msg: IncomingMessage
    is_admin: bool
    clearance: Clearance
    exposure: Exposure
    started: float = field(default_factory=time.monotonic)
    session: Session | None = None
    flush_note: str = ""
    rag: RagContext | None = None
    system: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    stored_user: Message | None = None  # the user message as kept in the session (no RAG blocks)
    sent_user: Message | None = None  # the same with this turn's RAG blocks, as sent to the model
    result: LoopResult | None = None
    reply: str = ""
    failed: bool = False
    timings: dict[str, float] = field(default_factory=dict)  # stage -> ms, logged with turn_done
    silent_token: str | None = None  # a reply that is exactly this is not sent (heartbeat: nothing fired)


class Agent:
    def __init__(self, deps: AgentDeps, settings: AgentSettings = AgentSettings()) -> None:
        self.deps = deps
        self.settings = settings
        self.daily_logs = deps.daily_logs or DailyLogs(Path(deps.workspace) / "memory")
        self.principals = deps.principals
        self.sessions = SessionStore(deps.db)
        self.context = ContextBuilder(deps.db, deps.embedder, settings.context, self.principals)
        self.prompt = PromptBuilder(
            deps.workspace,
            self.daily_logs,
            deps.facts,
            owner=deps.owner,
            me=deps.gateway.me,
            daily_log_lines=settings.daily_log_lines,
            salience_threshold=settings.salience_threshold,
            learnings=deps.learnings,
            principals=self.principals,
            shared=deps.shared_paths,
        )
        self.compactor = Compactor(
            deps.db,
            deps.llm,
            self.sessions,
            self.daily_logs,
            deps.facts,
            knowledge=deps.knowledge,
            distiller=deps.distiller,
        )
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
        )
        self.paused = False
        self._locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._running: dict[int, asyncio.Task[str | None]] = {}
        self._flushed: set[str] = set()  # sessions already told to flush (once per session)
        self._offered: dict[str, set[str]] = {}  # session id -> tools offered so far (sticky tool RAG)
        self.turns = 0
        self._daily_log_failing = False
        self.last_timings: dict[str, float] = {}  # stage timings of the last finished turn (bench, /status)

    # -- entry points ---------------------------------------------------------------------------------
    def is_admin(self, user: UserInfo | None) -> bool:
        """A control right (commands, policies, tool settings), never a read right."""
        return user is not None and self.principals.is_admin(user.id)

    def wants_immediate(self, msg: IncomingMessage) -> bool:
        """True for messages a per-chat queue must deliver at once, not behind the running turn (/stop)."""
        found = command_of(msg)
        return found is not None and found[0].name == "stop"

    async def handle(
        self,
        msg: IncomingMessage,
        *,
        silent_token: str | None = None,
        clearance: Clearance | None = None,
        is_admin: bool | None = None,
    ) -> str | None:
        """Handle one accepted message; returns the text sent in reply (None when nothing was sent).

        The turn's clearance is its chat's (the owner's DM reads everything, any other chat its own label
        and public items); a scheduled turn passes the clearance and rights of the turn that created it."""
        clearance = clearance or self.principals.clearance(msg.chat.id)
        turn = Turn(
            msg=msg,
            is_admin=self.is_admin(msg.sender) if is_admin is None else is_admin,
            clearance=clearance,
            exposure=Exposure({clearance.label}),  # its own chat and session
            silent_token=silent_token,
        )
        found = command_of(msg)
        if found is not None:
            return await self._run_command(turn, *found)
        if self.paused and not turn.is_admin:
            log.info("paused_ignored", chat_id=msg.chat.id)
            return None
        chat_id = msg.chat.id
        async with self._locks[chat_id]:
            task = asyncio.create_task(self._pipeline(turn), name=f"turn-{chat_id}-{msg.message_id}")
            self._running[chat_id] = task
            try:
                return await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # we are being cancelled (shutdown), not /stop
                log.info("turn_stopped", chat_id=chat_id)
                return None
            finally:
                self._running.pop(chat_id, None)

    async def run_scheduled(
        self,
        chat_id: int,
        text: str,
        *,
        clearance: Clearance | None = None,
        principal: UserInfo | None = None,
        is_admin: bool = False,
        silent_token: str | None = None,
    ) -> str | None:
        """A turn the scheduler starts: ``text`` (the due task) answered in ``chat_id`` as the turn that
        created it: its clearance (default: the chat's), its principal and admin right, and no more.

        It passes the rate limiter like a message (``NotNow`` when it may not run now)."""
        if self.deps.rate_check is not None and not self.principals.is_admin(principal.id if principal else None):
            limited = self.deps.rate_check(chat_id, principal.id if principal else None)
            if limited:
                raise NotNow(limited)
        chat = await archived_chat(self.deps.db, chat_id)
        # A synthetic message id: negative, so it never collides with (or excludes) an archived message.
        msg = IncomingMessage(
            chat=chat,
            sender=principal,
            message_id=-(int(time.time() * 1000) % 2**31) or -1,
            text=text,
            date=time.time(),
        )
        return await self.handle(msg, silent_token=silent_token, clearance=clearance, is_admin=is_admin)

    async def run_task(self, task: Any, text: str) -> str | None:
        """A due ``agent`` task (``teleton.scheduler``): a scheduled turn with the task's stored origin."""
        clearance, principal, is_admin = task_origin(task, self.principals)
        return await self.run_scheduled(
            int(task.chat_id), text, clearance=clearance, principal=principal, is_admin=is_admin
        )

    async def task_context(self, task: Any) -> ToolContext:
        """The context a due ``tool`` task's call runs in: the task's stored origin, nothing wider."""
        clearance, principal, is_admin = task_origin(task, self.principals)
        return ToolContext(
            chat=await archived_chat(self.deps.db, int(task.chat_id)),
            sender=principal,
            is_admin=is_admin,
            clearance=clearance,
            deps=self.tool_deps,
            exposure=Exposure({clearance.label}),
        )

    async def refresh_owner(self) -> None:
        """After SIGHUP: the owner shown in prompts follows ``principals``."""
        self.prompt.owner = await load_owner(self.deps.db, self.principals.owner_id)

    async def sweep_sessions(self) -> int:
        """End idle / past-reset sessions now, each with its summary (a periodic job: without it a session
        is only closed when its chat speaks again). Returns how many were ended."""
        rows = await self.deps.db.fetchall("select chat_id from sessions where active = 1")
        ended = 0
        for (chat_id,) in rows:
            async with self._locks[int(chat_id)]:
                session = await self.sessions.active(int(chat_id))
                if session is None:
                    continue
                reason = expiry_reason(
                    session,
                    time.time(),
                    reset_hour=self.settings.session_reset_hour,
                    idle_minutes=self.settings.session_idle_minutes,
                )
                if reason is None:
                    continue
                await self.compactor.close(session, self.principals.clearance(int(chat_id)), reason)
                self._forget(session.id)
                ended += 1
        return ended

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
    async def _pipeline(self, turn: Turn) -> str | None:
        stages = (
            ("session", self._stage_session),
            ("compaction", self._stage_compaction),
            ("context", self._stage_context),
            ("answer", self._stage_answer),
            ("reply", self._stage_reply),
            ("persist", self._stage_persist),
        )
        try:
            for name, stage in stages:
                began = time.monotonic()
                await stage(turn)
                turn.timings[name] = round((time.monotonic() - began) * 1000, 1)
        except asyncio.CancelledError:
            await asyncio.shield(self._persist_stopped(turn))
            raise
        self.turns += 1
        self.last_timings = turn.timings
        log.info(
            "turn_done",
            chat_id=turn.msg.chat.id,
            ms=round((time.monotonic() - turn.started) * 1000),
            iterations=turn.result.iterations if turn.result else 0,
            failed=turn.failed,
            stages=turn.timings,
        )
        return turn.reply or None

    async def _stage_session(self, turn: Turn) -> None:
        chat_id = turn.msg.chat.id
        session = await self.sessions.active(chat_id)
        if session is not None:
            reason = expiry_reason(
                session,
                time.time(),
                reset_hour=self.settings.session_reset_hour,
                idle_minutes=self.settings.session_idle_minutes,
            )
            if reason:
                # Shielded: a /stop must not leave a session ended without its successor.
                await asyncio.shield(self.compactor.close(session, turn.clearance, reason))
                self._forget(session.id)
                session = None
        turn.session = session or await self.sessions.create(chat_id)

    async def _stage_compaction(self, turn: Turn) -> None:
        session = _required(turn.session)
        t = self.settings.thresholds
        if needs_hard(len(session.messages), session.last_input_tokens, t):
            outcome = await asyncio.shield(self.compactor.compact(session, turn.clearance, t.keep_last))
            turn.session = outcome.session
            self._forget(session.id)
        elif needs_soft(session.last_input_tokens, t) and session.id not in self._flushed:
            self._flushed.add(session.id)
            await self.compactor.flush(session, turn.clearance)
            turn.flush_note = FLUSH_NOTE

    async def _stage_context(self, turn: Turn) -> None:
        msg = turn.msg
        selector = self.deps.tool_selector

        async def pick_tools(vector: Any) -> Sequence[str] | None:
            # Tool RAG shares the message's one query embedding with memory retrieval.
            return None if selector is None else await selector(msg.text, vector, msg.chat, turn.is_admin)

        # Retrieval, tool choice and the system prompt do not depend on each other: built concurrently.
        turn.rag, _ = await asyncio.gather(
            self.context.build(msg, turn.clearance, pick_tools), self._build_system(turn)
        )
        turn.exposure.add(*turn.rag.labels())
        text = user_text(msg, await self._quoted(msg))
        turn.stored_user = {"role": "user", "content": text}
        rag_text = turn.rag.render(turn.clearance.label)
        turn.sent_user = (
            turn.stored_user
            if not rag_text
            else {"role": "user", "content": [{"type": "text", "text": rag_text}, {"type": "text", "text": text}]}
        )
        names = self._sticky_tools(_required(turn.session).id, turn.rag.extra)
        turn.tools = self.deps.registry.schemas(msg.chat, turn.is_admin, names, is_owner=turn.clearance.is_owner)

    def _forget(self, session_id: str) -> None:
        """Drop per-session state of a session that ended (the daemon runs for months)."""
        self._flushed.discard(session_id)
        self._offered.pop(session_id, None)

    def _sticky_tools(self, session_id: str, picked: Sequence[str] | None) -> list[str] | None:
        """Tool RAG's pick, grown over the session rather than replaced each turn.

        The tool list is the first thing in a request, so any change to it misses the prompt cache for
        everything after it. Offering the union of this session's picks changes the list only when a new
        tool becomes relevant; past ``STICKY_TOOLS_MAX`` the set starts over from this turn's pick.
        """
        if picked is None:
            return None
        offered = self._offered.get(session_id, set()) | set(picked)
        if len(offered) > STICKY_TOOLS_MAX:
            offered = set(picked)
        self._offered[session_id] = offered
        return sorted(offered)

    async def _quoted(self, msg: IncomingMessage) -> str:
        """The message this one replies to (same chat only), so "yes, that one" has its referent."""
        if msg.reply_to_id is None:
            return ""
        row = await self.deps.db.fetchone(
            "select sender_name, is_outgoing, text from tg_messages where chat_id = ? and message_id = ?",
            (msg.chat.id, msg.reply_to_id),
        )
        if row is None or not row["text"]:
            return ""
        who = "you" if row["is_outgoing"] else (row["sender_name"] or "someone")
        return f"{who}: {' '.join(row['text'].split())[:300]}"

    async def _build_system(self, turn: Turn) -> None:
        turn.system = await self.prompt.build(
            PromptInputs(
                chat=turn.msg.chat,
                sender=turn.msg.sender,
                clearance=turn.clearance,
                exposure=turn.exposure,
                summary=_required(turn.session).summary,
                flush_note=turn.flush_note,
            )
        )

    async def _stage_answer(self, turn: Turn) -> None:
        ctx = ToolContext(
            chat=turn.msg.chat,
            sender=turn.msg.sender,
            is_admin=turn.is_admin,
            clearance=turn.clearance,
            deps=self.tool_deps,
            message_id=turn.msg.message_id,
            exposure=turn.exposure,
        )

        async def execute(call: ToolCall) -> ToolResult:
            return await self.deps.registry.execute(call, ctx)

        keep = self.settings.masking_keep
        for attempt in range(2):
            session = _required(turn.session)
            try:
                turn.result = await run_tool_loop(
                    self.deps.llm,
                    system=turn.system,
                    messages=[*session.messages, _required(turn.sent_user)],
                    tools=turn.tools,
                    execute=execute,
                    limits=self.settings.limits,
                    prepare=lambda messages: mask_observations(messages, keep),
                )
                return
            except ContextOverflowError:
                if attempt:
                    log.error("context_overflow_after_compaction", chat_id=turn.msg.chat.id)
                    turn.failed, turn.reply = True, TOO_LONG
                    return
                log.warning("context_overflow", chat_id=turn.msg.chat.id, messages=len(session.messages))
                outcome = await asyncio.shield(
                    self.compactor.compact(session, turn.clearance, max(1, self.settings.thresholds.keep_last // 2))
                )
                turn.session = outcome.session
                self._forget(session.id)
                await self._build_system(turn)  # the summary changed
            except LLMError as exc:
                log.error("llm_failed", chat_id=turn.msg.chat.id, error=str(exc))
                break
        turn.failed = True
        turn.reply = UNAVAILABLE

    async def _stage_reply(self, turn: Turn) -> None:
        result = turn.result
        if result is not None:
            if spoke_here(result, self.settings.send_tools, turn.msg.chat.id):
                turn.reply = ""  # the model already spoke through a tool
                return
            turn.reply = result.text
        if turn.silent_token and turn.reply.strip().strip(".").upper() == turn.silent_token.upper():
            log.info("turn_silent", chat_id=turn.msg.chat.id)
            turn.reply = ""
            return
        if turn.reply:
            await self._send(turn.msg, turn.reply)

    async def _stage_persist(self, turn: Turn) -> None:
        session = _required(turn.session)
        if turn.result is None:
            return  # the model never answered: keep the session as it was; the feed still has the message
        session.messages = mask_observations(
            [*session.messages, _required(turn.stored_user), *turn.result.new_messages], self.settings.masking_keep
        )
        session.account(turn.result.usage, turn.result.last_usage)
        await self.sessions.save(session)
        await self._log_exchange(turn)
        await self._learn(turn)

    async def _learn(self, turn: Turn) -> None:
        """After the reply: tool errors to the learnings, the exchange to the distiller (background)."""
        result = _required(turn.result)
        msg = turn.msg
        # Only the owner's own tool errors become learnings: they are read in the owner's prompt, and a
        # group could otherwise write there through an error message it provoked.
        if self.deps.learnings is not None and turn.clearance.is_owner:
            calls = {c.id: c for c in result.tool_calls}
            for message in result.new_messages:
                for block in message["content"] if isinstance(message["content"], list) else []:
                    call = calls.get(block.get("tool_use_id", ""))
                    if block.get("type") == "tool_result" and block.get("is_error") and call is not None:
                        try:
                            await self.deps.learnings.record_error(call.name, str(call.input), block["content"])
                        except Exception as exc:
                            log.warning("learning_not_recorded", error=repr(exc))
        if self.deps.distiller is not None and not turn.failed:
            from teleton.agent.distiller import Exchange

            self.deps.distiller.schedule(
                Exchange(
                    chat=msg.chat,
                    user_name=sender_label(msg.sender),
                    user_text=msg.text,
                    assistant_text=turn.reply or result.text,
                    label=turn.clearance.label,
                )
            )

    async def _persist_stopped(self, turn: Turn) -> None:
        # /stop: keep the user's message and a marker, so the history stays well-formed and honest.
        session = turn.session
        if session is None or turn.stored_user is None:
            return
        session.messages = [
            *session.messages,
            turn.stored_user,
            {"role": "assistant", "content": "(stopped by the user before answering)"},
        ]
        try:
            await self.sessions.save(session)
        except Exception as exc:
            log.warning("stopped_turn_not_saved", error=repr(exc))

    async def _log_exchange(self, turn: Turn) -> None:
        msg = turn.msg
        said = msg.text
        if msg.chat.type != "dm":
            said = f"{sender_label(msg.sender)}: {said}"
        answer = turn.reply or (turn.result.text if turn.result else "") or "(answered with tools)"
        where = origin(msg.chat, turn.clearance, sender_label(msg.sender))
        try:
            await self.daily_logs.append_exchange(said, answer, origin=where)
        except Exception as exc:  # seed 003: persistence is fail-safe, never blocks a reply
            # Logged once per failure streak: a full disk must not also flood the log it cannot write.
            if not self._daily_log_failing:
                log.error("daily_log_write_failed", error=f"{type(exc).__name__}: {exc}")
            self._daily_log_failing = True
        else:
            if self._daily_log_failing:
                log.info("daily_log_write_recovered")
            self._daily_log_failing = False

    async def _send(self, msg: IncomingMessage, text: str) -> None:
        reply_to = msg.message_id if msg.chat.type != "dm" else None
        for i, chunk in enumerate(split_message(text)):
            try:
                await self.deps.gateway.send_message(msg.chat.id, chunk, reply_to=reply_to if i == 0 else None)
            except Exception as exc:
                log.error("send_failed", chat_id=msg.chat.id, error=repr(exc))
                return

    # -- commands -------------------------------------------------------------------------------------
    async def _run_command(self, turn: Turn, spec: CommandSpec, args: str) -> str | None:
        shared = turn.msg.chat.type != "dm"
        if spec.owner and not turn.clearance.is_owner:
            text = f"/{spec.name} works only in the owner's own chat with me."
        elif (spec.admin or (spec.group_admin and shared)) and not turn.is_admin:
            text = f"/{spec.name} is for admins only" + (" in a group." if not spec.admin else ".")
        elif spec.needs_lock:
            async with self._locks[turn.msg.chat.id]:
                text = await spec.handler(self, turn, args)
        else:
            text = await spec.handler(self, turn, args)
        await self._send(turn.msg, text)
        return text

    async def end_session(self, turn: Turn, reason: str) -> str:
        session = await self.sessions.active(turn.msg.chat.id)
        if session is None:
            return ""
        self._forget(session.id)
        return await self.compactor.close(session, turn.clearance, reason)

    async def compact(self, turn: Turn, keep: int) -> CompactionOutcome | None:
        session = await self.sessions.active(turn.msg.chat.id)
        if session is None:
            return None
        outcome = await self.compactor.compact(session, turn.clearance, keep, reason="manual")
        if outcome.session.id != session.id:
            self._forget(session.id)
        return outcome


async def load_owner(db: Database, owner_id: int | None) -> UserInfo | None:
    """The owner as the archive knows them (name, username), for the system prompt."""
    if owner_id is None:
        return None
    row = await db.fetchone("select first_name, last_name, username from tg_users where id = ?", (owner_id,))
    if row is None:
        return UserInfo(id=owner_id)
    return UserInfo(id=owner_id, first_name=row["first_name"], last_name=row["last_name"], username=row["username"])


def _required(value: Any) -> Any:
    if value is None:
        raise RuntimeError("pipeline stage ran out of order")
    return value
