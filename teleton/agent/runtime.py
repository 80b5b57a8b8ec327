"""The agent runtime: one turn as an explicit, ordered pipeline of small async stages (the list is ``_pipeline``;
what each stage does: docs/architecture.md, "One message, from the update to the reply").

Slash commands answer first (``/stop`` even while a turn runs). Each stage takes the turn record (``turn.py``) and
the services it shares with the others (``core.py``); context (the read) runs before persist (the write), so the
model sees memory as it was before this exchange. Turns of one chat run one at a time, chats in parallel; the
turn's delivery record is kept from acceptance to answer, so a restart answers what was accepted exactly once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from teleton.agent.commands.slash import command_of, run_command
from teleton.agent.core import AgentCore
from teleton.agent.delivery.records import Delivery, MessageDelivery, NoRecord, finish
from teleton.agent.deps import AgentDeps, AgentSettings, load_owner
from teleton.agent.scheduled import ScheduledTurns
from teleton.agent.stages import aftercare, answering, context, session
from teleton.agent.stages.media import read_media, speak_reply
from teleton.agent.turn import Turn
from teleton.agent.turn_stats import TurnStats
from teleton.gateway.contract import IncomingMessage, TurnDeferred
from teleton.memory.feed import message_life as life
from teleton.privacy import Clearance, Taint
from teleton.privacy.quoting import outside
from teleton.storage.database import Database, storage_fault

__all__ = ["Agent", "AgentDeps", "AgentSettings"]

log = structlog.get_logger(__name__)


class Agent(AgentCore):
    """The shared services (``AgentCore``) and the stage list that runs each turn."""

    def __init__(self, deps: AgentDeps, settings: AgentSettings | None = None) -> None:
        super().__init__(deps, settings)
        self.scheduled = ScheduledTurns(self, self.handle_turn)

    # -- entry points ---------------------------------------------------------------------------------
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
            delivery=delivery or _delivery(self.deps.db, msg),
            silent_token=silent_token,
            from_task=from_task,
            typed="" if from_task or msg.forwarded_from else msg.text,
        )
        found = command_of(msg)
        if found is not None:
            await run_command(self, turn, *found)
        elif self.paused and not turn.is_admin:
            log.info("paused_ignored", chat_id=msg.chat.id)
            await finish(turn.delivery, turn.msg.chat.id, life.STATE_IGNORED, "paused")
            return None
        else:
            async with self.locks.hold(msg.thread):
                if not await self._run_pipeline(turn):
                    return turn
        await finish(turn.delivery, turn.msg.chat.id, *answering.outcome(turn))
        return turn

    async def _run_pipeline(self, turn: Turn) -> bool:
        """False when the turn was stopped (/stop): its record says so, and nothing more is due."""
        chat_id, thread = turn.msg.chat.id, turn.msg.thread
        task = asyncio.create_task(self._pipeline(turn), name=f"turn-{chat_id}-{turn.msg.message_id}")
        self.running[thread] = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we are being cancelled (shutdown), not /stop: the messages stay accepted
            log.info("turn_stopped", chat_id=chat_id)
            await finish(turn.delivery, turn.msg.chat.id, life.STATE_FAILED, "stopped by the user")
            return False
        except Exception as exc:
            fault = storage_fault(exc)
            if fault is not None:  # not the message's fault: it is answered once the disk takes writes again
                raise TurnDeferred(fault) from exc
            why = f"error: {type(exc).__name__}: {exc}"[:300]
            await finish(turn.delivery, turn.msg.chat.id, life.STATE_FAILED, why)
            raise
        finally:
            self.running.pop(thread, None)
        return True

    async def run_scheduled(self, chat_id: int, text: str, **kwargs: Any) -> str | None:
        return await self.scheduled.run(chat_id, text, **kwargs)

    async def refresh_owner(self) -> None:
        """After SIGHUP: the owner shown in prompts follows ``principals``."""
        self.prompt.owner = await load_owner(self.deps.db, self.principals.owner_id)

    async def shutdown(self, grace_s: float = 5.0) -> None:
        """Let running turns finish for ``grace_s``, then cancel them (SIGTERM); then let the distiller finish."""
        tasks = [t for t in self.running.values() if not t.done()]
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
            ("session", lambda t: session.open_session(self, t)),
            ("compaction", lambda t: session.keep_in_window(self, t)),
            ("context", lambda t: context.build_context(self, t)),
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
            self.last_turns.record(turn.msg.chat.id, TurnStats(turn.memory, turn.result.usage))
        log.info(
            "turn_done",
            chat_id=turn.msg.chat.id,
            ms=round((time.monotonic() - turn.started) * 1000),
            iterations=turn.result.iterations if turn.result else 0,
            failed=bool(turn.failed or turn.undelivered),
            stages=turn.timings,
        )


def _delivery(db: Database, msg: IncomingMessage) -> Delivery:
    """A turn's record of its answer. A re-answer (the message was edited after its answer) changes the
    answer already delivered, in place: the message stays answered, and a crash only loses the edit."""
    if msg.replaces:
        return NoRecord()
    return MessageDelivery(db, msg.chat.id, msg.answers, topic_id=msg.topic_id)
