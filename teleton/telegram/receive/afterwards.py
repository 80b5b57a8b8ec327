"""What happens to an answer when its question changes soon after it (issue 36).

A message its sender edits within ``telegram.reanswer_edit_minutes`` of its answer is offered again, through
the same gate and lane as any message, as a re-answer: the turn runs on the new words, and its answer is
edited into the earlier reply (``agent/delivery/reply_parts.py``). A message deleted within that time takes
its reply with it, in private chats or everywhere (``telegram.delete_replies``). The answer a message got is
found through ``storage/reply_parts.py``. No Telethon here.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

import structlog

from teleton.gateway.contract import GatewayError, IncomingMessage
from teleton.storage import Database, reply_parts
from teleton.telegram.receive.dispatch import Dispatcher

log = structlog.get_logger(__name__)


@dataclass
class Afterwards:
    db: Database
    dispatcher: Dispatcher
    delete: Callable[[int, Sequence[int]], Awaitable[None]]  # the gateway's delete_messages
    window_s: float = 300.0
    delete_replies: str = "dm"  # dm | all | off
    clock: Callable[[], float] = field(default=time.time)

    async def edited(self, msg: IncomingMessage) -> bool:
        """Offer an answered message its sender edited as a re-answer, if its answer is recent enough."""
        if self.window_s <= 0:
            return False
        since = self.clock() - self.window_s
        found = await self.db.read(lambda conn: reply_parts.of_questions(conn, msg.chat.id, [msg.message_id], since))
        if not found:
            return False
        again = replace(msg, replaces=found[0].message_ids, replaced_at=found[0].sent_at)
        decision = self.dispatcher.offer(again, again=True)
        log.info("reanswer_offered", chat_id=msg.chat.id, message_id=msg.message_id, accepted=decision.accept)
        return decision.accept

    async def deleted(self, chat_id: int | None, message_ids: Sequence[int]) -> int:
        """Delete the recent replies to deleted messages where ``delete_replies`` says; how many replies went."""
        if self.window_s <= 0 or self.delete_replies == "off" or not message_ids:
            return 0
        since = self.clock() - self.window_s
        found = await self.db.read(lambda conn: reply_parts.of_questions(conn, chat_id, message_ids, since))
        gone = 0
        for reply in found:
            if self.delete_replies == "dm" and reply.chat_id <= 0:
                continue
            try:
                await self.delete(reply.chat_id, list(reply.message_ids))
                gone += 1
            except GatewayError as exc:  # already gone, or no right to delete: the question's deletion stands
                log.warning("reply_not_deleted", chat_id=reply.chat_id, error=str(exc))
        return gone
