"""Telethon event handlers: each turns one update into records and hands them to the feed pipeline.

Thin on purpose: the TL details are in ``convert``, the rules in ``pipeline``/``dispatch``/``policy``.
Only cached entities are used (those the update carried); a handler never makes a network request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from telethon import TelegramClient, events
from telethon.tl import types

from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.memory.feed import message_life as life
from teleton.telegram import convert
from teleton.telegram.receive.afterwards import Afterwards
from teleton.telegram.receive.pipeline import FeedPipeline

log = structlog.get_logger(__name__)


@dataclass
class FeedHandlers:
    pipeline: FeedPipeline
    me: Callable[[], UserInfo | None]
    # Input peers seen in updates, so replies can be sent without asking Telegram to resolve the chat.
    peers: dict[int, Any] = field(default_factory=dict)
    afterwards: Afterwards | None = None  # an answered message edited or deleted soon after its answer

    def install(self, client: TelegramClient) -> None:
        client.add_event_handler(self.on_new_message, events.NewMessage())
        client.add_event_handler(self.on_edit, events.MessageEdited())
        client.add_event_handler(self.on_delete, events.MessageDeleted())
        client.add_event_handler(
            self.on_service, events.Raw(types=[types.UpdateNewMessage, types.UpdateNewChannelMessage])
        )
        client.add_event_handler(
            self.on_reactions, events.Raw(types=[types.UpdateMessageReactions, types.UpdateBotMessageReaction])
        )

    async def on_new_message(self, event: events.NewMessage.Event) -> None:
        # Not awaited: the pipeline commits it with its batch and then offers it on; this update's task
        # ends here instead of waiting (thousands of waiting tasks are what a burst would cost otherwise).
        (await self.submit(event.message)).add_done_callback(_report_failure)

    async def ingest(self, msg: Any) -> None:
        """Archive one message (live, or fetched by catch-up) and offer it to the agent if it is new."""
        if isinstance(msg, types.MessageService):
            await self.ingest_service(msg, _entities_of(msg))
            return
        await (await self.submit(msg))

    async def submit(self, msg: Any) -> Any:
        chat, users, sender, record = self.records(msg)
        incoming = self._incoming(msg, chat, sender, record)
        return await self.pipeline.submit(record, chat=chat, users=users, incoming=incoming)

    def _incoming(self, msg: Any, chat: ChatInfo, sender: UserInfo | None, record: Any) -> IncomingMessage:
        me = self.me()
        me_id, me_username = (me.id, me.username) if me else (None, None)
        replying = record.reply_to_id is not None
        # Telegram's own `mentioned` flag is set for a mention of us and for a reply to our message.
        flagged = bool(getattr(msg, "mentioned", False))
        return convert.incoming(
            chat,
            sender,
            record,
            mentions=convert.mentions_us(msg, me_id, me_username) or (flagged and not replying),
            reply_to_us=flagged and replying,
            media=convert.media_info(msg),
        )

    async def on_edit(self, event: events.MessageEdited.Event) -> None:
        chat, users, sender, record = self.records(event.message)
        result = await self.pipeline.edit(record, chat=chat, users=users)
        answered = result.changed and result.agent_state == life.STATE_ANSWERED and not record.is_outgoing
        if answered and self.afterwards is not None:
            await self.afterwards.edited(self._incoming(event.message, chat, sender, record))

    async def on_delete(self, event: events.MessageDeleted.Event) -> None:
        deleted = list(event.deleted_ids or [])
        await self.pipeline.delete(event.chat_id, deleted)
        if self.afterwards is not None:
            await self.afterwards.deleted(event.chat_id, deleted)

    async def on_reactions(self, update: Any) -> None:
        me = self.me()
        change = convert.reaction_change(update, me.id if me else None, time.time())
        if change is not None:
            await self.pipeline.reactions(change)

    async def on_service(self, update: Any) -> None:
        msg = update.message
        if isinstance(msg, types.MessageService):
            await self.ingest_service(msg, getattr(update, "_entities", None) or {})

    async def ingest_service(self, msg: types.MessageService, entities: dict[int, Any]) -> None:
        chat_id = convert.peer_id(msg.peer_id)
        entity = entities.get(chat_id)
        chat = convert.chat_record(chat_id, convert.chat_type(msg.peer_id, entity, msg), entity)
        me = self.me()
        sender_id = convert.sender_of(msg, chat_id, me.id if me else None)
        names = {pid: convert.display_name(e) for pid, e in entities.items()}
        actor = names.get(sender_id, str(sender_id)) if sender_id is not None else "someone"
        text, title, delta = convert.service_text(msg.action, actor, names)
        record = convert.message_record(msg, chat_id, sender_id, actor, text=text)
        users = [convert.user_record(e) for e in entities.values() if isinstance(e, types.User)]
        await self.pipeline.service(record, chat=chat, users=users, new_title=title, member_delta=delta)

    def records(self, msg: Any) -> tuple[ChatInfo, list[UserInfo], UserInfo | None, Any]:
        """A message as the receive path files it: its chat, the people it names, its sender, its row."""
        chat_id = int(msg.chat_id)
        entity = msg.chat  # cached from the update's entities; None when it did not carry the chat
        kind = convert.chat_type(msg.peer_id, entity, msg)
        chat = convert.chat_record(chat_id, kind, entity)
        if msg.input_chat is not None:
            self.peers[chat_id] = msg.input_chat
        me = self.me()
        sender_id = convert.sender_of(msg, chat_id, me.id if me else None)
        sender_entity = msg.sender
        users: list[UserInfo] = []
        sender: UserInfo | None = None
        if isinstance(sender_entity, types.User):
            user = convert.user_record(sender_entity)
            users.append(user)
            sender = user
        elif sender_entity is not None:
            sender = UserInfo(id=int(sender_id or chat_id), first_name=convert.display_name(sender_entity))
        elif sender_id is not None:
            sender = me if (me is not None and sender_id == me.id) else UserInfo(id=sender_id)
        if isinstance(entity, types.User) and entity is not sender_entity:
            users.append(convert.user_record(entity))
        name = (
            convert.display_name(sender_entity)
            if sender_entity is not None
            else (sender.display_name if sender else "")
        )
        return chat, users, sender, convert.message_record(msg, chat_id, sender_id, name)


def _entities_of(msg: Any) -> dict[int, Any]:
    """The entities a custom Message fetched by history carries (sender and chat), keyed by marked id."""
    found: dict[int, Any] = {}
    for entity in (getattr(msg, "_sender", None), getattr(msg, "_chat", None)):
        if entity is not None:
            found[convert.peer_id(entity)] = entity
    return found


def _report_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("archive_failed", error=str(future.exception()))
