"""Turns nobody typed: due tasks and the heartbeat (docs/privacy.md, "Scheduled work"; delivery: docs/operations.md).

A scheduled turn runs with exactly the clearance, principal and admin right stored with its task (the
creating turn's; ``privacy.task_origin``), passes the rate limiter like a message (``NotNow`` when it may
not run yet), and its reply must reach the chat: an undelivered one raises ``DeliveryFailed`` so the
scheduler retries it, and the task's ``sending_at`` / ``delivered_at`` make sure it is sent once.
"""

from __future__ import annotations

import time
from typing import Protocol

from teleton.agent.core import AgentCore
from teleton.agent.delivery.records import Delivery, DeliveryFailed, NoRecord, TaskDelivery
from teleton.agent.messages import archived_chat
from teleton.agent.privacy import task_origin, task_taint
from teleton.agent.turn import Turn
from teleton.gateway.contract import IncomingMessage, Thread, UserInfo
from teleton.privacy import Clearance, Taint
from teleton.scheduler.scheduler import NotNow
from teleton.scheduler.task_store import TaskRecord
from teleton.tools.registry import ToolContext


class RunsTurns(Protocol):
    """``runtime.Agent.handle_turn``: the whole pipeline, for a turn nobody typed."""

    async def __call__(
        self,
        msg: IncomingMessage,
        *,
        silent_token: str | None = None,
        clearance: Clearance | None = None,
        is_admin: bool | None = None,
        delivery: Delivery | None = None,
        from_task: bool = False,
        taint: Taint | None = None,
    ) -> Turn | None: ...


class ScheduledTurns:
    def __init__(self, agent: AgentCore, handle_turn: RunsTurns) -> None:
        self.agent = agent
        self.handle_turn = handle_turn

    async def run(
        self,
        chat_id: int,
        text: str,
        *,
        clearance: Clearance | None = None,
        principal: UserInfo | None = None,
        is_admin: bool = False,
        silent_token: str | None = None,
        delivery: Delivery | None = None,
        taint: Taint | None = None,
        topic_id: int | None = None,
    ) -> str | None:
        """``text`` answered in ``chat_id`` as the turn that created it (default clearance: the chat's)."""
        agent = self.agent
        principal_id = principal.id if principal else None
        if agent.deps.rate_check is not None and not agent.principals.is_admin(principal_id):
            limited = agent.deps.rate_check(chat_id, principal_id)
            if limited:
                raise NotNow(limited)
        chat = await archived_chat(agent.deps.db, chat_id)
        # A synthetic message id: negative, so it never collides with (or excludes) an archived message.
        msg = IncomingMessage(
            chat=chat,
            sender=principal,
            message_id=-(int(time.time() * 1000) % 2**31) or -1,
            text=text,
            date=time.time(),
            topic_id=topic_id,
        )
        turn = await self.handle_turn(
            msg,
            silent_token=silent_token,
            clearance=clearance,
            is_admin=is_admin,
            delivery=delivery or NoRecord(),
            from_task=True,
            taint=taint,
        )
        if turn is not None and turn.undelivered:
            raise DeliveryFailed(turn.undelivered)
        return turn.reply if turn is not None else None

    async def run_task(self, task: TaskRecord, text: str) -> str | None:
        """A due ``agent`` task (``teleton.scheduler``): a scheduled turn with the task's stored origin."""
        clearance, principal, is_admin = task_origin(task, self.agent.principals)
        return await self.run(
            task.chat,
            text,
            clearance=clearance,
            principal=principal,
            is_admin=is_admin,
            delivery=TaskDelivery(self.agent.deps.db, task.chat, task_id=int(task.id), topic_id=task.topic_id),
            taint=task_taint(task),
            topic_id=task.topic_id,
        )

    async def sweep_sessions(self) -> int:
        """End idle / past-reset sessions now, each with its summary (a periodic job: without it a session
        is only closed when its chat speaks again). Returns how many were ended."""
        agent = self.agent
        rows = await agent.deps.db.fetchall("select chat_id, topic_id from sessions where active = 1")
        ended = 0
        for chat_id, topic in rows:
            async with agent.locks.hold(Thread(int(chat_id), int(topic))):  # the key its turns hold
                session = await agent.sessions.active(int(chat_id), int(topic))
                reason = agent.expiry(session)
                if session is None or reason is None:
                    continue
                await agent.compactor.close(session, agent.principals.clearance(int(chat_id)), reason)
                agent.forget(session.id)
                ended += 1
        return ended

    async def task_context(self, task: TaskRecord) -> ToolContext:
        """The context a due ``tool`` task's call runs in: the task's stored origin, nothing wider."""
        clearance, principal, is_admin = task_origin(task, self.agent.principals)
        return ToolContext(
            chat=await archived_chat(self.agent.deps.db, task.chat),
            sender=principal,
            is_admin=is_admin,
            clearance=clearance,
            deps=self.agent.tool_deps,
            taint=task_taint(task),  # the clearance's own label is added by the context
            from_task=True,
            topic_id=task.topic_id,
        )
