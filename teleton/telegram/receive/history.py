"""Fetching history: `teleton feed backfill` (import a chat's past) and the catch-up after downtime.

Backfilled messages are archive-only (never answered). Catch-up goes through the live path instead, so a
message that arrived while the daemon was down is archived and, if recent enough, answered, exactly once
no matter whether Telethon's own update catch-up or this gap fill sees it first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog
from telethon import TelegramClient, errors, utils
from telethon.tl import types

from teleton.gateway.contract import ChatInfo, GatewayError
from teleton.memory.feed import archive as fa
from teleton.memory.feed import message_life as life
from teleton.storage import Database
from teleton.telegram import convert
from teleton.telegram.flood import with_flood_retry
from teleton.telegram.receive.archiver import ArchiveBatcher
from teleton.telegram.receive.handlers import FeedHandlers

log = structlog.get_logger(__name__)

PAGE = 100  # messages per history request (Telegram's maximum)


@dataclass(frozen=True)
class BackfillResult:
    chat_id: int
    title: str
    fetched: int
    new: int


async def resolve_chat(client: TelegramClient, chat: str | int) -> Any:
    """A chat by id, @username or t.me link, with an error that says which one was not found."""
    target: str | int = chat
    if isinstance(chat, str) and chat.lstrip("-").isdigit():
        target = int(chat)
    try:
        return await client.get_entity(target)
    except (ValueError, errors.RPCError) as exc:
        raise GatewayError(f"chat {chat!r} not found (use an id from `teleton feed stats`, @username or link)") from exc


async def backfill(
    client: TelegramClient,
    db: Database,
    chat: str | int,
    *,
    limit: int | None = None,
    flood_wait_max_s: float = 600,
    progress: Callable[[int], None] = lambda _n: None,
) -> BackfillResult:
    """Import up to ``limit`` messages (None: all) of ``chat``, newest first; already archived ones are kept."""
    entity = await resolve_chat(client, chat)
    chat_id = int(utils.get_peer_id(entity))
    kind = convert.chat_type(utils.get_peer(entity), entity)
    chat_rec = convert.chat_record(chat_id, kind, entity)
    batcher = ArchiveBatcher(db)
    fetched = new = 0
    offset_id = 0
    try:
        while limit is None or fetched < limit:
            want = PAGE if limit is None else min(PAGE, limit - fetched)
            page = await with_flood_retry(
                partial(client.get_messages, entity, limit=want, offset_id=offset_id),
                max_wait_s=flood_wait_max_s,
                what="history",
            )
            if not page:
                break
            new += await batcher.run(partial(_archive_page, chat=chat_rec, page=page))
            fetched += len(page)
            offset_id = min(m.id for m in page)
            progress(len(page))
            if len(page) < want:
                break
    finally:
        await batcher.close()
    return BackfillResult(chat_id=chat_id, title=chat_rec.title, fetched=fetched, new=new)


def _archive_page(conn: Any, chat: ChatInfo, page: list[Any]) -> int:
    now = time.time()
    fa.upsert_chat(conn, chat, now)
    new = 0
    for msg in page:
        sender = getattr(msg, "_sender", None)
        if isinstance(sender, types.User):
            fa.upsert_user(conn, convert.user_record(sender), now)
        name = convert.display_name(sender) if sender is not None else ""
        sender_id = convert.sender_of(msg, chat.id, None)
        if isinstance(msg, types.MessageService):
            names = {sender_id: name} if sender_id is not None else {}
            text = convert.service_text(msg.action, name or "someone", names)[0]
            record = convert.message_record(msg, chat.id, sender_id, name, text=text)
        else:
            record = convert.message_record(msg, chat.id, sender_id, name)
        new += int(fa.insert_message(conn, record, agent_state=life.STATE_HISTORY).new)
    return new


async def catch_up_archive(
    client: TelegramClient,
    db: Database,
    handlers: FeedHandlers,
    *,
    dialogs: int = 100,
    per_chat: int = 500,
    flood_wait_max_s: float = 600,
) -> int:
    """Fill gaps left by downtime in chats we already archive; return how many messages were fetched.

    Chats never archived are skipped (importing a whole history is `teleton feed backfill`'s job).
    """
    fetched = 0
    found = await with_flood_retry(
        lambda: client.get_dialogs(limit=dialogs), max_wait_s=flood_wait_max_s, what="dialogs"
    )
    for dialog in found:
        top = dialog.message.id if dialog.message is not None else 0
        last = await db.read(partial(fa.last_message_id, chat_id=int(dialog.id)))
        if last is None or top <= last:
            continue
        missing = await with_flood_retry(
            partial(client.get_messages, dialog.entity, limit=per_chat, min_id=last),
            max_wait_s=flood_wait_max_s,
            what="history",
        )
        for msg in sorted(missing, key=lambda m: m.id):  # oldest first, as they were written
            await handlers.ingest(msg)
        fetched += len(missing)
        log.info("catch_up", chat_id=int(dialog.id), fetched=len(missing))
    return fetched
