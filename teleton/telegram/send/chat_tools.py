"""The Telegram requests behind the chat tools: a poll's results and closing it, Telegram's own scheduled
messages, marking a chat read, a sticker by emoji, joining and leaving chats, and Telegram's server-side search.

A mixin of ``TelegramActions``: every request goes through its ``_call`` (FloodWait slept and retried, any
Telegram error a ``GatewayError``) and every chat through ``_peer`` (the input peers updates carried, else a
lookup). What the search finds is archived through the gateway's own pipeline, archive-only: a message found
this way is history, never offered to the agent as something to answer.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog
from telethon import TelegramClient, functions, utils
from telethon.tl import types

from teleton.gateway.contract import ChatInfo, GatewayError, IncomingMessage, SentMessage, UserInfo
from teleton.memory.feed.archive import MessageRecord
from teleton.storage.reply_sends import new_random_base
from teleton.telegram import convert
from teleton.telegram.send.ports import Archive, SendSettings, Updates
from teleton.telegram.send.sending import tl_entities
from teleton.telegram.send.split import plan_reply

log = structlog.get_logger(__name__)
T = TypeVar("T")

SEARCH_MAX = 100  # one request's worth (Telegram's page size)
GIF_BOT = "gif"  # Telegram's own GIF search, an inline bot


class ChatToolActions:
    client: TelegramClient
    pipeline: Archive
    handlers: Updates
    me: UserInfo | None
    settings: SendSettings

    # What ``TelegramActions`` provides.
    async def _peer(self, chat_id: int) -> Any:
        raise NotImplementedError

    async def _call(self, call: Callable[[], Awaitable[T]], what: str, *, attempts: int = 3) -> T:
        raise NotImplementedError

    # ---- polls ----------------------------------------------------------------------------------------

    async def _poll(self, chat_id: int, message_id: int) -> tuple[Any, Any]:
        """(the chat's input peer, the message) when message ``message_id`` of the chat is a poll."""
        peer = await self._peer(chat_id)
        msg = await self._call(lambda: self.client.get_messages(peer, ids=message_id), "get message")
        if not isinstance(getattr(msg, "media", None), types.MessageMediaPoll):
            raise GatewayError(f"message {message_id} is not a poll")
        return peer, msg

    async def poll_results(self, chat_id: int, message_id: int) -> tuple[str, list[tuple[str, int | None]], bool]:
        peer, msg = await self._poll(chat_id, message_id)
        poll, results = msg.media.poll, msg.media.results
        request = functions.messages.GetPollResultsRequest(peer=peer, msg_id=message_id, poll_hash=poll.hash)
        try:
            updates = await self._call(lambda: self.client(request), "poll results")
        except GatewayError as exc:  # a bot account may not ask: the counts the message carries are then the latest
            log.info("poll_results_from_message", chat_id=chat_id, error=str(exc))
        else:
            for update in getattr(updates, "updates", None) or ():
                if isinstance(update, types.UpdateMessagePoll) and update.poll_id == poll.id:
                    results, poll = update.results, update.poll or poll
        votes = {v.option: v.voters for v in (getattr(results, "results", None) or ())}
        options = [(_plain(answer.text), votes.get(answer.option)) for answer in poll.answers]
        return _plain(poll.question), options, bool(poll.closed)

    async def close_poll(self, chat_id: int, message_id: int) -> None:
        peer, msg = await self._poll(chat_id, message_id)
        if not msg.out:
            raise GatewayError(f"message {message_id} is a poll someone else sent; only its sender can close it")
        poll = msg.media.poll
        if poll.closed:
            return
        closed = copy.copy(poll)  # the poll as it is (id, question, answers, flags), closed: Telegram's way to stop it
        closed.closed = True
        request = functions.messages.EditMessageRequest(
            peer=peer, id=message_id, media=types.InputMediaPoll(poll=closed)
        )
        await self._call(lambda: self.client(request), "close poll")

    # ---- Telegram's own scheduled messages -------------------------------------------------------------

    async def list_scheduled(self, chat_id: int) -> list[tuple[int, float, str]]:
        peer = await self._peer(chat_id)
        request = functions.messages.GetScheduledHistoryRequest(peer=peer, hash=0)
        result = await self._call(lambda: self.client(request), "scheduled messages")
        found = [m for m in getattr(result, "messages", None) or () if isinstance(m, types.Message)]
        rows = [(int(m.id), m.date.timestamp(), m.message or f"[{convert.media_kind(m) or 'media'}]") for m in found]
        return sorted(rows, key=lambda row: (row[1], row[0]))

    async def schedule_message(self, chat_id: int, text: str, when: float) -> SentMessage:
        parts = plan_reply(text) if text.strip() else []
        if len(parts) != 1:
            raise GatewayError("a scheduled message is one message: 1 to 4096 characters")
        peer = await self._peer(chat_id)
        request = functions.messages.SendMessageRequest(
            peer=peer,
            message=parts[0].text,
            no_webpage=True,
            random_id=new_random_base(),  # one id for the retries too: Telegram schedules it once
            entities=tl_entities(parts[0].spans),
            schedule_date=datetime.fromtimestamp(when, UTC),
        )
        result = await self._call(lambda: self.client(request), "schedule message")
        return SentMessage(chat_id=chat_id, message_id=_scheduled_id(result), text=text)

    async def cancel_scheduled(self, chat_id: int, message_ids: Sequence[int]) -> None:
        peer = await self._peer(chat_id)
        request = functions.messages.DeleteScheduledMessagesRequest(peer=peer, id=list(message_ids))
        await self._call(lambda: self.client(request), "cancel scheduled messages")

    # ---- reading, stickers --------------------------------------------------------------------------

    async def mark_read(self, chat_id: int) -> None:
        peer = await self._peer(chat_id)
        # max_id 0 reads everything; Telethon sends channels.readHistory for a supergroup or channel.
        await self._call(lambda: self.client.send_read_acknowledge(peer, max_id=0), "mark read")

    async def send_sticker(self, chat_id: int, emoji: str) -> SentMessage:
        request = functions.messages.GetStickersRequest(emoticon=emoji, hash=0)
        found = await self._call(lambda: self.client(request), "find sticker")
        stickers = [d for d in getattr(found, "stickers", None) or () if isinstance(d, types.Document)]
        if not stickers:
            raise GatewayError(f"Telegram offers no sticker for {emoji}")
        peer = await self._peer(chat_id)
        msg = await self._call(lambda: self.client.send_file(peer, stickers[0]), "send sticker")
        return SentMessage(chat_id=chat_id, message_id=int(msg.id), text=emoji)

    async def send_gif(self, chat_id: int, query: str) -> SentMessage:
        # Telegram's GIF search is the @gif inline bot: a user account asks it and sends its first result. A
        # bot may not use another bot inline, so there the answer is one line, not an attempt.
        if self.settings.mode == "bot":
            raise GatewayError("a bot account cannot search GIFs (Telegram lets only user accounts ask @gif)")
        peer = await self._peer(chat_id)
        results = await self._call(lambda: self.client.inline_query(GIF_BOT, query, entity=peer), "find GIF")
        if not results:
            raise GatewayError(f"@{GIF_BOT} found no GIF for {query!r}")
        msg = await self._call(lambda: results[0].click(peer), "send GIF")
        return SentMessage(chat_id=chat_id, message_id=int(getattr(msg, "id", 0) or 0), text=query)

    # ---- joining and leaving ----------------------------------------------------------------------------

    async def join_chat(self, link: str) -> ChatInfo:
        name, invite = utils.parse_username(link.strip())
        if not name:
            raise GatewayError(f"{link!r} is neither an invite link nor a public @username")
        if invite:
            request: Any = functions.messages.ImportChatInviteRequest(hash=name)
        else:
            request = functions.channels.JoinChannelRequest(channel=await self._channel(name))
        result = await self._call(lambda: self.client(request), "join chat")
        chats = [c for c in getattr(result, "chats", None) or () if isinstance(c, (types.Chat, types.Channel))]
        if not invite:
            chats = [c for c in chats if c.id == request.channel.channel_id] or chats
        if not chats:
            raise GatewayError("Telegram did not say which chat was joined")
        return _chat_info(chats[0])

    async def _channel(self, username: str) -> Any:
        peer = await self._call(lambda: self.client.get_input_entity(username), "find chat")
        if not isinstance(peer, types.InputPeerChannel):
            raise GatewayError(f"@{username} is a person, not a group or channel")
        return utils.get_input_channel(peer)

    async def leave_chat(self, chat: int | str) -> None:
        peer = await self._chat_peer(chat)
        if isinstance(peer, types.InputPeerChannel):
            request: Any = functions.channels.LeaveChannelRequest(channel=utils.get_input_channel(peer))
        elif isinstance(peer, types.InputPeerChat):
            request = functions.messages.DeleteChatUserRequest(chat_id=peer.chat_id, user_id=types.InputUserSelf())
        else:
            raise GatewayError(f"{chat} is a private chat, not a group or channel")
        await self._call(lambda: self.client(request), "leave chat")

    async def _chat_peer(self, chat: int | str) -> Any:
        if isinstance(chat, int):
            return await self._peer(chat)
        name, invite = utils.parse_username(chat.strip())
        if not name:
            raise GatewayError(f"{chat!r} is neither a chat id, an invite link nor a @username")
        if not invite:
            return await self._call(lambda: self.client.get_input_entity(name), "find chat")
        request = functions.messages.CheckChatInviteRequest(hash=name)
        invited = await self._call(lambda: self.client(request), "check invite link")
        if not isinstance(invited, types.ChatInviteAlready):  # a link to a chat we are not in: nothing to leave
            raise GatewayError("I am not a member of the chat that link invites to")
        return utils.get_input_peer(invited.chat)

    # ---- Telegram's search --------------------------------------------------------------------------

    def _found(self, msg: Any) -> tuple[ChatInfo, list[UserInfo], UserInfo | None, MessageRecord]:
        """A found message as the receive path files it (``FeedHandlers.records``); a service message with
        its action in words, as ``FeedHandlers.ingest_service`` writes one."""
        chat, users, sender, record = self.handlers.records(msg)
        if isinstance(msg, types.MessageService):
            names = {record.sender_id: record.sender_name} if record.sender_id is not None else {}
            text = convert.service_text(msg.action, record.sender_name or "someone", names)[0]
            record = replace(record, text=text)
        return chat, users, sender, record

    async def search_telegram(self, query: str, chat_id: int | None = None, limit: int = 20) -> list[IncomingMessage]:
        entity = None if chat_id is None else await self._peer(chat_id)
        limit = max(1, min(limit, SEARCH_MAX))
        # Telethon asks messages.search in a chat, messages.searchGlobal without one.
        found = await self._call(lambda: self.client.get_messages(entity, search=query, limit=limit), "search")
        converted = [self._found(m) for m in found or () if isinstance(m, (types.Message, types.MessageService))]
        # Archive-only (no ``incoming``): the pipeline files it as history, the same rows and batches as
        # every other message, and offers none of it to the agent.
        writes = [await self.pipeline.submit(record, chat=chat, users=users) for chat, users, _, record in converted]
        await asyncio.gather(*writes)
        return [convert.incoming(chat, sender, record, mentions=False, reply_to_us=False)
                for chat, _, sender, record in converted]  # fmt: skip


def _chat_info(entity: Any) -> ChatInfo:
    chat_id = int(utils.get_peer_id(entity))
    return convert.chat_record(chat_id, convert.chat_type(utils.get_peer(entity), entity), entity)


def _scheduled_id(result: Any) -> int:
    """The scheduled message's id in Telegram's answer (an updateNewScheduledMessage), or 0 when it names none."""
    if isinstance(result, types.UpdateShortSentMessage):
        return int(result.id)
    for update in getattr(result, "updates", None) or ():
        if isinstance(update, types.UpdateNewScheduledMessage):
            return int(update.message.id)
    return 0


def _plain(text: Any) -> str:
    """A poll's question or option: text with entities in this layer, a plain string in older ones."""
    return str(getattr(text, "text", text))
