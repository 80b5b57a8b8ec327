"""The session and compaction stages: which session a turn runs in, and keeping it within the model's window.

A daily reset or an idle expiry ends the chat's session with a summary before the turn opens the next one;
past the hard threshold the session is written to memory and compacted; past the soft threshold the model is
told once to save what matters (a memory flush). The user's words are kept first, so a /stop during a
session swap still keeps them (``aftercare.persist_stopped``).
"""

from __future__ import annotations

from pathlib import Path

import structlog

from teleton.agent.core import AgentCore
from teleton.agent.messages import quoted_referent, user_text
from teleton.agent.turn import Turn, required
from teleton.agent.window import oversize
from teleton.agent.window.compaction import needs_hard, needs_soft
from teleton.agent.window.sessions import Session
from teleton.storage.schema import SESSION_ARCHIVED

log = structlog.get_logger(__name__)

FLUSH_NOTE = (
    "## Memory flush\nThis conversation has filled half of your context window and will be compacted "
    "soon. Before answering, save anything worth keeping with memory_save (facts) or memory_write (notes)."
)


async def open_session(agent: AgentCore, turn: Turn) -> None:
    limit = agent.settings.max_input_chars
    fitted = await oversize.fit(Path(agent.deps.workspace), turn.msg, limit)
    if fitted is not turn.msg:  # kept whole in a file; everything after this reads the excerpt
        turn.msg = fitted
        log.info("long_message_shortened", chat_id=turn.msg.chat.id, kept_chars=limit)
    text = user_text(turn.msg, await quoted_referent(agent.deps.db, turn.msg))
    turn.stored_user = {"role": "user", "content": text}
    if turn.msg.message_id > 0:  # archived: a fact a transcript gives can name it (scheduled turns are not)
        turn.stored_user[SESSION_ARCHIVED] = [turn.msg.chat.id, turn.msg.message_id, turn.msg.date]
    thread = turn.msg.thread
    session = await agent.sessions.active(thread.chat_id, thread.topic)
    reason = agent.expiry(session)
    if session is not None and reason:
        old = session

        async def close() -> Session:
            closed = await agent.compactor.close(old, turn.clearance, reason, successor=True)
            return required(closed.successor)

        await agent.swap(turn, old, close)
        return
    turn.session = session or await agent.sessions.create(thread.chat_id, topic=thread.topic)


async def keep_in_window(agent: AgentCore, turn: Turn) -> None:
    session = required(turn.session)
    t = agent.settings.thresholds
    if needs_hard(len(session.messages), session.last_input_tokens, t):
        await agent.compact(turn, t.keep_last)
    elif needs_soft(session.last_input_tokens, t) and session.id not in agent.flushed:
        agent.flushed.add(session.id)
        await agent.compactor.flush(session, turn.clearance)
        turn.flush_note = FLUSH_NOTE
