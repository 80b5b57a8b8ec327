"""Our own messages into the archive as they are sent: what every send and streamed edit records.

A sent message is archived as ours so the next turn sees it as context; a failed archive write is logged
and never hides that the message was delivered.
"""

from __future__ import annotations

import structlog

from teleton.gateway.contract import UserInfo
from teleton.memory.feed.archive import MessageRecord
from teleton.telegram.send.ports import Archive

log = structlog.get_logger(__name__)


class ArchivesSent:
    """The archiving half of ``TelegramActions``, shared by its sends and its streamed replies."""

    pipeline: Archive
    me: UserInfo | None

    async def _archive_sent(
        self,
        chat_id: int,
        message_id: int,
        date: float,
        text: str,
        reply_to: int | None,
        topic_id: int | None = None,
        *,
        edited: bool = False,
    ) -> None:
        """Our message as sent; ``edited``: its new words (a message archived before keeps its row)."""
        me = self.me
        record = MessageRecord(
            chat_id=chat_id,
            message_id=message_id,
            date=date,
            text=text,
            sender_id=me.id if me else None,
            sender_name=me.display_name if me else "",
            is_outgoing=True,
            reply_to_id=reply_to,
            topic_id=topic_id,
            edit_date=date if edited else None,
        )
        try:
            await (self.pipeline.edit(record) if edited else self.pipeline.message(record))
        except Exception as exc:  # the message was delivered; a failed archive write must not hide that
            log.error("archive_sent_failed", chat_id=chat_id, error=str(exc))
