"""The slow notice: a user whose answer is late (the model overloaded, retrying, or hung) is told once that it is
coming, instead of a minute of silence; the answer follows it.

A timer runs while the answer stage works and is cancelled when it ends. Past ``after_s`` it sends one short
message straight through the gateway, not through ``answering.say``: the notice is not the answer, so the
delivery record must not say ``sending`` (a crash after the notice leaves the message owed its answer). The
notice is kept on the turn (``Turn.slow_notice``) so the reply can follow or replace it. No notice when
nobody waits for this turn (a scheduled task, the heartbeat), when ``after_s`` is 0 (off), or when a screen
already shows the turn as it happens (``teleton chat`` streams it, retries included). The wait is injected
(``AgentDeps.sleep``) so a test moves time instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import structlog

from teleton.agent.turn import Turn
from teleton.gateway.contract import Gateway
from teleton.llm.progress import WATCHING

log = structlog.get_logger(__name__)

NOTICE = "The model is slow to answer; I'll reply when it does."
Sleep = Callable[[float], Awaitable[None]]


def wanted(turn: Turn, after_s: float) -> bool:
    """Whether someone is waiting for this turn's answer without seeing it being made."""
    return after_s > 0 and not turn.from_task and turn.silent_token is None and WATCHING.get() is None


@contextlib.asynccontextmanager
async def slow_notice(gateway: Gateway, turn: Turn, after_s: float, sleep: Sleep) -> AsyncIterator[None]:
    """Around the work of answering: one notice to the turn's chat if it takes longer than ``after_s``."""
    if not wanted(turn, after_s):
        yield
        return
    sending = False

    async def notify() -> None:
        nonlocal sending
        await sleep(after_s)
        sending = True
        msg = turn.msg
        # As the reply will be: in a group, quoting the message it answers.
        reply_to = msg.message_id if msg.chat.type != "dm" and msg.message_id > 0 else None
        try:
            turn.slow_notice = await gateway.send_message(msg.chat.id, NOTICE, reply_to=reply_to, topic_id=msg.topic_id)
        except Exception as exc:  # a lost notice must not cost the answer
            log.warning("slow_notice_failed", chat_id=msg.chat.id, error=f"{type(exc).__name__}: {exc}")
            return
        log.info("slow_notice_sent", chat_id=msg.chat.id, after_s=after_s)

    timer = asyncio.create_task(notify(), name=f"slow-notice-{turn.msg.chat.id}")
    try:
        yield
    finally:
        # A notice already on its way is let through, so it cannot arrive after the answer.
        if not sending:
            timer.cancel()
        await asyncio.gather(timer, return_exceptions=True)
