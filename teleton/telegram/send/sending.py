"""One part of a reply, sent with our own ``random_id`` so that Telegram delivers it at most once.

Telethon's ``send_message`` draws a fresh id on every call; here ``messages.sendMessage`` is built with the id
the delivery record holds, and Telegram's ``RANDOM_ID_DUPLICATE`` means "it went out before": the part counts
as delivered and is looked up in the chat to be archived (docs/operations.md, "Exactly once"). The client is
built with ``raise_last_call_error=True`` so that, after Telethon's retries of this 500-class error, the
duplicate itself surfaces rather than a bare ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from telethon import TelegramClient, errors, functions
from telethon.tl import types

from teleton.telegram.send.markdown import Span

log = structlog.get_logger(__name__)

LOOKUP_RECENT = 30  # our recent messages searched for a duplicate's id


@dataclass(frozen=True)
class Delivered:
    """A part Telegram holds: its id and date, or ``id`` 0 when a duplicate could not be found again."""

    id: int
    date: float


def send_request(
    peer: Any, text: str, entities: list[Any], reply_to: int | None, random_id: int, topic_id: int | None = None
) -> functions.messages.SendMessageRequest:
    return functions.messages.SendMessageRequest(
        peer=peer,
        message=text,
        no_webpage=True,
        reply_to=reply_header(reply_to, topic_id),
        random_id=random_id,
        entities=entities,
    )


def reply_header(reply_to: int | None, topic_id: int | None) -> types.InputReplyToMessage | None:
    """Where a message lands in its chat (https://core.telegram.org/api/forum): inside a forum topic it replies
    to the topic's top message, or to ``reply_to`` with the topic named as ``top_msg_id``; without a topic it
    replies to ``reply_to`` or to nothing."""
    if not topic_id:
        return types.InputReplyToMessage(reply_to_msg_id=reply_to) if reply_to else None
    if not reply_to or reply_to == topic_id:
        return types.InputReplyToMessage(reply_to_msg_id=topic_id)
    return types.InputReplyToMessage(reply_to_msg_id=reply_to, top_msg_id=topic_id)


async def send_once(
    client: TelegramClient,
    call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
    peer: Any,
    request: functions.messages.SendMessageRequest,
) -> Delivered:
    """Send ``request`` through ``call`` (our FloodWait and error handling); a duplicate is delivered."""
    try:
        result = await call(lambda: client(request))
    except Exception as exc:
        if not isinstance(exc.__cause__ or exc, errors.RandomIdDuplicateError):
            raise
        return await _find_sent(client, peer, request.message)
    return _delivered(client, request, result, peer)


def _delivered(client: TelegramClient, request: Any, result: Any, peer: Any) -> Delivered:
    if isinstance(result, types.UpdateShortSentMessage):
        return Delivered(int(result.id), _stamp(result.date))
    message = client._get_response_message(request, result, peer)  # Telethon's own random_id -> id mapping
    if message is None:
        return Delivered(0, 0.0)
    return Delivered(int(message.id), _stamp(message.date))


async def _find_sent(client: TelegramClient, peer: Any, text: str) -> Delivered:
    """The message a duplicate ``random_id`` names: our newest recent message with the same words."""
    try:
        recent = await client.get_messages(peer, limit=LOOKUP_RECENT)
    except Exception as exc:  # delivered either way; only its archive row is missing (the catch-up fills it)
        log.warning("duplicate_lookup_failed", error=f"{type(exc).__name__}: {exc}")
        return Delivered(0, 0.0)
    for message in recent or ():
        if getattr(message, "out", False) and (message.message or "").strip() == text.strip():
            return Delivered(int(message.id), _stamp(message.date))
    return Delivered(0, 0.0)


def _stamp(date: datetime | None) -> float:
    return date.timestamp() if date is not None else 0.0


def tl_entities(spans: tuple[Span, ...] | list[Span]) -> list[Any]:
    return [tl_entity(span) for span in spans]


def tl_entity(span: Span) -> Any:
    o, n = span.offset, span.length
    if span.kind == "bold":
        return types.MessageEntityBold(o, n)
    if span.kind == "italic":
        return types.MessageEntityItalic(o, n)
    if span.kind == "strike":
        return types.MessageEntityStrike(o, n)
    if span.kind == "code":
        return types.MessageEntityCode(o, n)
    if span.kind == "pre":
        return types.MessageEntityPre(o, n, span.language or "")
    if span.kind == "link":
        return types.MessageEntityTextUrl(o, n, span.url or "")
    if span.kind == "blockquote":
        return types.MessageEntityBlockquote(o, n)
    return types.MessageEntityUnknown(o, n)
