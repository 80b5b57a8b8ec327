"""Telethon TL objects → archive records and gateway messages. No I/O: everything comes from the objects.

Chat ids are Telethon's "marked" ids (users positive, basic groups negative, channels and supergroups
-100…), the same numbers ``telethon.utils.get_peer_id`` gives, so one integer names a chat everywhere.
"""

from __future__ import annotations

import re
from typing import Any

from telethon import helpers, utils
from telethon.tl import types

from teleton.gateway.contract import ChatInfo, ChatType, IncomingMessage, MediaInfo, UserInfo
from teleton.memory.feed.archive import MessageRecord
from teleton.memory.feed.reactions import Reaction, ReactionChange


def peer_id(peer: Any) -> int:
    return int(utils.get_peer_id(peer))


def chat_type(peer: Any, entity: Any = None, message: Any = None) -> ChatType:
    if isinstance(peer, types.PeerUser):
        return "dm"
    if isinstance(peer, types.PeerChat):
        return "group"
    if isinstance(entity, types.Channel):
        return "group" if entity.megagroup or entity.gigagroup else "channel"
    if isinstance(entity, types.ChannelForbidden):
        return "group" if entity.megagroup else "channel"
    # Without the entity, a broadcast post is marked as such on the message itself.
    return "channel" if getattr(message, "post", False) else "group"


def user_record(user: types.User) -> UserInfo:
    return UserInfo(
        id=int(user.id),
        first_name=user.first_name or "",
        last_name=user.last_name or "",
        username=_username(user),
        phone=user.phone or None,  # Telegram sends it only when the account lets us see it
        is_bot=bool(user.bot),
        partial=bool(user.min),
    )


def chat_record(chat_id: int, kind: ChatType, entity: Any) -> ChatInfo:
    if isinstance(entity, types.User):
        title = " ".join(p for p in (entity.first_name, entity.last_name) if p) or (entity.username or "")
        return ChatInfo(id=chat_id, type=kind, title=title, username=_username(entity))
    if isinstance(entity, (types.Chat, types.ChatForbidden)):
        return ChatInfo(
            id=chat_id,
            type=kind,
            title=entity.title or "",
            member_count=getattr(entity, "participants_count", None),
        )
    if isinstance(entity, (types.Channel, types.ChannelForbidden)):
        return ChatInfo(
            id=chat_id,
            type=kind,
            title=entity.title or "",
            username=_username(entity),
            member_count=getattr(entity, "participants_count", None),
        )
    return ChatInfo(id=chat_id, type=kind)


def sender_of(message: Any, chat_id: int, me_id: int | None) -> int | None:
    if message.from_id is not None:
        return peer_id(message.from_id)
    if isinstance(message.peer_id, types.PeerUser):
        return me_id if message.out else int(message.peer_id.user_id)
    if getattr(message, "post", False) or isinstance(message.peer_id, types.PeerChannel):
        return chat_id  # a channel post, or an anonymous admin: the chat itself speaks
    return None


def display_name(entity: Any) -> str:
    if isinstance(entity, types.User):
        name = " ".join(p for p in (entity.first_name, entity.last_name) if p)
        return name or (f"@{entity.username}" if entity.username else str(entity.id))
    title = getattr(entity, "title", None)
    return str(title) if title else ""


def media_kind(message: Any) -> str | None:
    media = getattr(message, "media", None)
    if media is None or isinstance(media, types.MessageMediaEmpty):
        return None
    if isinstance(media, types.MessageMediaPhoto):
        return "photo"
    if isinstance(media, types.MessageMediaDocument):
        return _document_kind(media.document)
    simple = {
        types.MessageMediaGeo: "location",
        types.MessageMediaGeoLive: "live_location",
        types.MessageMediaVenue: "venue",
        types.MessageMediaContact: "contact",
        types.MessageMediaPoll: "poll",
        types.MessageMediaDice: "dice",
        types.MessageMediaGame: "game",
        types.MessageMediaInvoice: "invoice",
        types.MessageMediaWebPage: "webpage",
        types.MessageMediaStory: "story",
        types.MessageMediaGiveaway: "giveaway",
    }
    return simple.get(type(media), "other")


def _document_kind(document: Any) -> str:
    attrs = getattr(document, "attributes", None) or []
    for attr in attrs:
        if isinstance(attr, types.DocumentAttributeSticker):
            return "sticker"
        if isinstance(attr, types.DocumentAttributeAnimated):
            return "gif"
    for attr in attrs:
        if isinstance(attr, types.DocumentAttributeVideo):
            return "video_note" if attr.round_message else "video"
        if isinstance(attr, types.DocumentAttributeAudio):
            return "voice" if attr.voice else "audio"
    return "document"


READABLE_MEDIA = frozenset({"photo", "sticker", "voice", "audio", "video_note", "document"})


def media_info(message: Any) -> MediaInfo | None:
    """What the message's file declares (kind, size, type, name, length), for the kinds the agent can read."""
    kind = media_kind(message)
    if kind not in READABLE_MEDIA:
        return None
    file = getattr(message, "file", None)  # Telethon's view of the photo or document: no I/O
    if file is None:
        return MediaInfo(kind=kind)
    duration = getattr(file, "duration", None)
    return MediaInfo(
        kind=kind,
        size=getattr(file, "size", None),
        mime_type=getattr(file, "mime_type", None) or "",
        file_name=getattr(file, "name", None) or "",
        duration_s=float(duration) if duration is not None else None,
    )


def forward_origin(message: Any) -> str | None:
    fwd = getattr(message, "fwd_from", None)
    if fwd is None:
        return None
    if fwd.from_name:
        return str(fwd.from_name)
    if fwd.from_id is not None:
        return str(peer_id(fwd.from_id))
    return "hidden"


def reply_to_id(message: Any) -> int | None:
    reply = getattr(message, "reply_to", None)
    if not isinstance(reply, types.MessageReplyHeader):
        return None
    if reply.forum_topic and reply.reply_to_top_id is None:
        return None  # written in a topic, not in reply to anyone: the header only names the topic
    return reply.reply_to_msg_id


def topic_of(message: Any) -> int | None:
    """The forum topic a message was written in: its top message's id (https://core.telegram.org/api/forum).
    A message in a topic carries ``forum_topic`` with the topic's id as ``reply_to_top_id`` when it answers
    someone there, as ``reply_to_msg_id`` when it does not; the service message that creates a topic is its
    top message. None: no topic (or the General one, whose messages carry no header)."""
    if isinstance(getattr(message, "action", None), types.MessageActionTopicCreate):
        return int(message.id)
    reply = getattr(message, "reply_to", None)
    if isinstance(reply, types.MessageReplyHeader) and reply.forum_topic:
        top = reply.reply_to_top_id or reply.reply_to_msg_id
        return int(top) if top else None
    return None


def message_record(
    message: Any, chat_id: int, sender_id: int | None, sender_name: str, *, text: str | None = None
) -> MessageRecord:
    is_service = isinstance(message, types.MessageService)
    edit_date = getattr(message, "edit_date", None)
    return MessageRecord(
        chat_id=chat_id,
        message_id=int(message.id),
        date=_ts(message.date),
        text=text if text is not None else (getattr(message, "message", None) or ""),
        sender_id=sender_id,
        sender_name=sender_name,
        is_outgoing=bool(message.out),
        media_kind=None if is_service else media_kind(message),
        reply_to_id=reply_to_id(message),
        fwd_from=None if is_service else forward_origin(message),
        is_service=is_service,
        edit_date=_ts(edit_date) if edit_date else None,
        topic_id=topic_of(message),
    )


def mentions_us(message: Any, me_id: int | None, me_username: str | None) -> bool:
    """True when the message names us: a mention entity of our account, or our @username in the text."""
    text = getattr(message, "message", None) or ""
    username = (me_username or "").lower()
    for ent in getattr(message, "entities", None) or []:
        if isinstance(ent, (types.MessageEntityMentionName, types.InputMessageEntityMentionName)):
            target = ent.user_id if isinstance(ent.user_id, int) else getattr(ent.user_id, "user_id", None)
            if me_id is not None and target == me_id:
                return True
        elif isinstance(ent, (types.MessageEntityMention, types.MessageEntityBotCommand)) and username:
            # Entity offsets count UTF-16 units: slice the surrogate-expanded text.
            span = helpers.del_surrogate(helpers.add_surrogate(text)[ent.offset : ent.offset + ent.length])
            if span.lower().endswith("@" + username):
                return True
    return bool(username) and _names_username(text, username)


def _names_username(text: str, username: str) -> bool:
    if "@" not in text:
        return False
    pattern = rf"(?<![\w@])@{re.escape(username)}(?![\w])|/\w+@{re.escape(username)}(?![\w])"
    return re.search(pattern, text, flags=re.IGNORECASE) is not None


def service_text(action: Any, actor: str, names: dict[int, str]) -> tuple[str, str | None, int]:
    """Describe a service message; also return (new title or None, member count change)."""

    def who(ids: list[int]) -> str:
        return ", ".join(names.get(int(i), str(i)) for i in ids)

    if isinstance(action, (types.MessageActionChatEditTitle,)):
        return f"{actor} changed the title to “{action.title}”", action.title, 0
    if isinstance(action, types.MessageActionChatCreate):
        return f"{actor} created the group “{action.title}”", action.title, 0
    if isinstance(action, types.MessageActionChannelCreate):
        return f"{actor} created the channel “{action.title}”", action.title, 0
    if isinstance(action, types.MessageActionChatAddUser):
        added = [int(u) for u in action.users]
        if len(added) == 1 and names.get(added[0]) == actor:
            return f"{actor} joined", None, 1
        return f"{actor} added {who(added)}", None, len(added)
    if isinstance(action, (types.MessageActionChatJoinedByLink, types.MessageActionChatJoinedByRequest)):
        return f"{actor} joined via invite link", None, 1
    if isinstance(action, types.MessageActionChatDeleteUser):
        gone = names.get(int(action.user_id), str(action.user_id))
        return (f"{actor} left" if gone == actor else f"{actor} removed {gone}"), None, -1
    if isinstance(action, types.MessageActionPinMessage):
        return f"{actor} pinned a message", None, 0
    if isinstance(action, types.MessageActionChatEditPhoto):
        return f"{actor} changed the chat photo", None, 0
    if isinstance(action, (types.MessageActionChatMigrateTo, types.MessageActionChannelMigrateFrom)):
        return f"{actor} upgraded the group to a supergroup", None, 0
    if isinstance(action, types.MessageActionTopicCreate):
        return f"{actor} created the topic “{action.title}”", None, 0
    if isinstance(action, types.MessageActionTopicEdit):
        return topic_edit_text(action, actor), None, 0
    label = re.sub(r"(?<!^)(?=[A-Z])", " ", type(action).__name__.removeprefix("MessageAction")).lower()
    return f"{actor}: {label}".strip(), None, 0


def reaction_text(reaction: Any) -> str | None:
    """A reaction as archived: the emoji, 'custom:<document id>' for a custom emoji, 'paid' for a paid one."""
    if isinstance(reaction, types.ReactionEmoji):
        return str(reaction.emoticon)
    if isinstance(reaction, types.ReactionCustomEmoji):
        return f"custom:{reaction.document_id}"
    if isinstance(reaction, types.ReactionPaid):
        return "paid"
    return None


def reaction_change(update: Any, me_id: int | None, now: float) -> ReactionChange | None:
    """What a reactions update says, as the archive keeps it. A bot is told one person's change (the
    reactions they have now); a user account the message's reactions now, with the recent reactors by name
    (all of them in a private chat, where the counts say who: ours is the one we chose)."""
    chat_id = peer_id(update.peer)
    if isinstance(update, types.UpdateBotMessageReaction):
        actor, when = peer_id(update.actor), _ts(update.date)
        present = [Reaction(actor, e, when) for e in map(reaction_text, update.new_reactions) if e]
        return ReactionChange(chat_id, int(update.msg_id), tuple(present), settled=frozenset({actor}))
    if not isinstance(update, types.UpdateMessageReactions):
        return None
    results = update.reactions.results or []
    counted = {e for e in (reaction_text(c.reaction) for c in results) if e}
    recent = update.reactions.recent_reactions
    if recent is None and isinstance(update.peer, types.PeerUser):
        present = []
        for count in results:
            emoji, left = reaction_text(count.reaction), int(count.count)
            if emoji is None:
                continue
            if count.chosen_order is not None and me_id is not None:
                present.append(Reaction(me_id, emoji, now))
                left -= 1
            if left > 0:
                present.append(Reaction(chat_id, emoji, now))
        return ReactionChange(chat_id, int(update.msg_id), tuple(present), None, frozenset(counted))
    named = [(r, reaction_text(r.reaction)) for r in recent or []]
    present = [Reaction(peer_id(r.peer_id), e, _ts(r.date)) for r, e in named if e]
    complete = sum(int(c.count) for c in results) == len(present)
    return ReactionChange(
        chat_id, int(update.msg_id), tuple(present), None if complete else frozenset(), frozenset(counted)
    )


def topic_edit_text(action: types.MessageActionTopicEdit, actor: str) -> str:
    """A topic renamed, closed, reopened, hidden or shown: what changed, in words."""
    changes = []
    if action.title:
        changes.append(f"renamed the topic to “{action.title}”")
    if action.closed is not None:
        changes.append("closed the topic" if action.closed else "reopened the topic")
    if action.hidden is not None:
        changes.append("hid the topic" if action.hidden else "showed the topic")
    if not changes and action.icon_emoji_id is not None:
        changes.append("changed the topic's icon")
    return f"{actor} {' and '.join(changes) or 'edited the topic'}"


def _username(entity: Any) -> str | None:
    name = getattr(entity, "username", None)
    if name:
        return str(name)
    for extra in getattr(entity, "usernames", None) or []:
        if getattr(extra, "active", False):
            return str(extra.username)
    return None


def _ts(value: Any) -> float:
    return float(value.timestamp()) if value is not None else 0.0


def incoming(
    chat: ChatInfo,
    sender: UserInfo | None,
    record: MessageRecord,
    *,
    mentions: bool,
    reply_to_us: bool,
    media: MediaInfo | None = None,
) -> IncomingMessage:
    return IncomingMessage(
        chat=chat,
        sender=sender,
        message_id=record.message_id,
        text=record.text,
        date=record.date,
        is_outgoing=record.is_outgoing,
        reply_to_id=record.reply_to_id,
        reply_to_us=reply_to_us,
        mentions_us=mentions,
        media_kind=record.media_kind,
        media=media,
        forwarded_from=record.fwd_from,
        topic_id=record.topic_id,
    )
