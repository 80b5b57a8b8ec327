"""What a turn's reply went out as, kept so a later edit or deletion of its question reaches it.

A re-answer (its question was edited soon after the answer, ``telegram/receive/afterwards.py``) is edited
into the first message of the earlier answer while Telegram still lets it be edited; the earlier answer's
other messages go. The messages every reply went out as are recorded (``storage/reply_parts.py``).
"""

from __future__ import annotations

import structlog

from teleton.gateway.contract import Gateway, IncomingMessage
from teleton.storage import reply_parts
from teleton.storage.database import Database

log = structlog.get_logger(__name__)

EDIT_MARGIN_S = 60.0  # an answer this close to Telegram's edit limit gets a new message instead


def edited_into(msg: IncomingMessage, now: float) -> int | None:
    """The message a re-answer is edited into, or None (not a re-answer, or too old to edit)."""
    if not msg.replaces or now - msg.replaced_at > reply_parts.EDIT_LIMIT_S - EDIT_MARGIN_S:
        return None
    return msg.replaces[0]


async def keep(db: Database, gateway: Gateway, msg: IncomingMessage, ids: tuple[int, ...], now: float) -> None:
    """Record what the reply went out as (``ids``); a re-answer also deletes what is left of the earlier
    answer. Neither may fail the turn: the reply is delivered."""
    left = [m for m in msg.replaces if m not in ids]
    try:
        if left:
            await gateway.delete_messages(msg.chat.id, left)
        await db.write(lambda conn: reply_parts.record(conn, msg.chat.id, msg.answers, ids, now))
    except Exception as exc:
        log.warning("reply_parts_not_kept", chat_id=msg.chat.id, error=f"{type(exc).__name__}: {exc}")
