"""A message's life in the archive: its answer states, the moves allowed between them, and ``move``.

Every writer of ``tg_messages.agent_state`` (the receive pipeline's gate verdicts, a turn's delivery
records, recovery after a restart) moves a message through ``move``, so the table below is the whole rule
(docs/operations.md, "Delivery guarantees"). A closed message is never reopened.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from teleton.storage.sqlite_driver import Connection

STATE_HISTORY = "history"  # imported by backfill or catch-up, our own messages: never answered
STATE_ARCHIVED = "archived"  # live, committed, not yet through the policy gate
STATE_IGNORED = "ignored"  # the gate said no (policy, not addressed, rate limit), or the agent is paused
STATE_ACCEPTED = "accepted"  # the gate said yes: queued for the agent
STATE_SENDING = "sending"  # its reply is going out (agent_note: since when)
STATE_ANSWERED = "answered"
STATE_FAILED = "failed"  # agent_note says why
STATE_TERMINAL = "terminal"  # typed in `teleton chat`: answered there and then, never taken up again

# What a message may become from each state. A turn may record "sending" before the batched verdict
# "accepted" lands, so an archived message may go straight on; a message whose reply is going out is
# settled by its reply rows (answered or failed), never queued or ignored again.
MOVES: dict[str, frozenset[str]] = {
    STATE_ARCHIVED: frozenset({STATE_ACCEPTED, STATE_IGNORED, STATE_SENDING, STATE_ANSWERED, STATE_FAILED}),
    STATE_ACCEPTED: frozenset({STATE_ACCEPTED, STATE_IGNORED, STATE_SENDING, STATE_ANSWERED, STATE_FAILED}),
    STATE_SENDING: frozenset({STATE_SENDING, STATE_ANSWERED, STATE_FAILED}),
    STATE_HISTORY: frozenset(),
    STATE_IGNORED: frozenset(),
    STATE_ANSWERED: frozenset(),
    STATE_FAILED: frozenset(),
    STATE_TERMINAL: frozenset(),
}
OPEN_STATES = tuple(state for state, moves in MOVES.items() if moves)  # owed an answer: a restart takes them up


def move(conn: Connection, chat_id: int, message_ids: Sequence[int], to: str, note: str | None = None) -> int:
    """Move these messages to ``to`` (with ``note``), each only if its state allows it; returns how many moved.

    A message whose state does not allow the move keeps it (a replayed update or a late verdict changes
    nothing); ``to`` that no state may move to is a bug in the caller and raises ValueError.
    """
    sources = [state for state, moves in MOVES.items() if to in moves]
    if not sources:
        raise ValueError(f"no message may move to {to!r}")
    if not message_ids:
        return 0
    cur = conn.execute(
        "update tg_messages set agent_state = ?, agent_note = ? where chat_id = ? "
        "and message_id in (select value from json_each(?)) and agent_state in (select value from json_each(?))",
        (to, note, chat_id, json.dumps(list(message_ids)), json.dumps(sources)),
    )
    return int(cur.rowcount)
