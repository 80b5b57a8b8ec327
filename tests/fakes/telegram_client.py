"""Real Telethon, no network: a ``TelegramClient`` whose only override is ``_call``, the one recording fake of
the suite (docs/development.md). Telethon builds every request it would send; ``_call`` records it and answers
with real TL results, about the people and chats below (the gateway tests' world, ``tests/telegram/``). A suite
with other people answers its own requests by type (``answers``) and the rest with ``otherwise``
(``tests/tools/conftest.py``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from telethon import TelegramClient, errors, functions, utils
from telethon.sessions import MemorySession
from telethon.tl import types

ME = types.User(id=1000, is_self=True, first_name="Tele", last_name="Ton", username="teleton_bot", access_hash=11)
ALICE = types.User(id=2001, first_name="Alice", username="alice", access_hash=21, phone="15550001")
BOB = types.User(id=2002, first_name="Bob", username="bobby", access_hash=22)
OTHER_BOT = types.User(id=2003, first_name="Helper", username="helper_bot", bot=True, access_hash=23)
ADMIN = types.User(id=2004, first_name="Ada", username="ada", access_hash=24)
GROUP = types.Chat(id=500, title="Book club", photo=types.ChatPhotoEmpty(), participants_count=5, date=None, version=1)
SUPERGROUP = types.Channel(
    id=700, title="Big group", photo=types.ChatPhotoEmpty(), date=None, megagroup=True, access_hash=77
)
CHANNEL = types.Channel(id=800, title="News", photo=types.ChatPhotoEmpty(), date=None, broadcast=True, access_hash=88)
# Telegram's GIF search, an inline bot (send_gif).
GIF_BOT = types.User(id=140267078, first_name="GIF search", username="gif", bot=True, access_hash=31)
# A public group the account is not in yet (join_chat, leave_chat): not in the entity cache, found by @username.
JOINABLE = types.Channel(
    id=900, title="Hikers", photo=types.ChatPhotoEmpty(), date=None, megagroup=True, access_hash=99, username="hikers"
)

Answer = Callable[[Any], Any]


class RecordingClient(TelegramClient):
    """A real, unconnected client: every request Telethon would send is recorded and answered here.

    A subclass answers more by overriding ``answer`` (and calling it on its parent); a test scripts a request
    type with ``answers``, failures with ``failures`` (in order) or ``fail_when``. An unexpected request fails
    the test, unless ``otherwise`` answers it."""

    def __init__(self) -> None:
        super().__init__(MemorySession(), api_id=1, api_hash="0" * 32)
        self.requests: list[Any] = []
        self.failures: list[BaseException] = []  # raised, in order, by the next requests
        self.fail_when: Callable[[Any], BaseException | None] | None = None
        self.answers: dict[type, Answer] = {}  # request type -> fn(request) -> TL result, before the defaults
        self.otherwise: Answer | None = None  # answers a request nothing else does (None: the test fails)
        self._ids = itertools.count(10_000)
        self.history: list[Any] = []  # what messages.getHistory answers (newest first, as Telegram does)
        self.stored: dict[int, Any] = {}  # messages.getMessages / channels.getMessages: message id -> message
        self.poll_counts: dict[int, Any] = {}  # messages.getPollResults: message id -> PollResults now
        self.scheduled: list[Any] = []  # messages.getScheduledHistory
        self.found: list[Any] = []  # messages.search and messages.searchGlobal (newest first)
        self.stickers: dict[str, list[Any]] = {}  # messages.getStickers by emoji (default: one sticker for it)

    async def _call(self, sender: Any, request: Any, ordered: bool = False, flood_sleep_threshold: Any = None) -> Any:
        if isinstance(request, list):  # Telethon sends chunked requests as one list
            return [await self._call(sender, r, ordered, flood_sleep_threshold) for r in request]
        self.requests.append(request)
        if self.fail_when is not None:
            error = self.fail_when(request)
            if error is not None:
                raise error
        if self.failures:
            raise self.failures.pop(0)
        scripted = self.answers.get(type(request))
        if scripted is not None:
            return scripted(request)
        return self.answer(request)

    def answer(self, request: Any) -> Any:
        known = self.answer_chat_tools(request)
        if known is not None:
            return known
        if isinstance(request, functions.messages.SendMessageRequest):
            return types.UpdateShortSentMessage(
                out=True,
                id=next(self._ids),
                pts=1,
                pts_count=1,
                date=datetime.now(UTC),
                entities=request.entities,
            )
        if isinstance(request, functions.users.GetUsersRequest):
            return [ME]
        if isinstance(request, (functions.messages.SetTypingRequest, functions.messages.SetBotCallbackAnswerRequest)):
            return True
        if isinstance(request, functions.messages.DeleteMessagesRequest):
            return types.messages.AffectedMessages(pts=2, pts_count=len(request.id))
        if isinstance(request, functions.messages.EditMessageRequest):
            return types.Updates(updates=[], users=[], chats=[], date=datetime.now(UTC), seq=0)
        if isinstance(request, functions.messages.GetHistoryRequest):
            return types.messages.Messages(messages=self.history, topics=[], chats=[], users=[ME, ALICE, BOB])
        if isinstance(request, (functions.bots.SetBotCommandsRequest, functions.upload.SaveFilePartRequest)):
            return True
        if isinstance(request, functions.channels.GetChannelsRequest):
            raise errors.ChannelInvalidError(request=request)  # what Telegram says for a chat we cannot see
        if self.otherwise is not None:
            return self.otherwise(request)
        raise AssertionError(f"unexpected request in test: {type(request).__name__}")

    def sent(self, kind: type = functions.messages.SendMessageRequest) -> list[Any]:
        """The requests of ``kind`` so far (messages sent, by default), in order."""
        return [r for r in self.requests if isinstance(r, kind)]

    def of(self, kind: type) -> list[Any]:
        return self.sent(kind)

    def answer_chat_tools(self, request: Any) -> Any:
        """What Telegram answers to the requests of the chat tools (polls, the schedule, stickers, forwards,
        joining, leaving, search), as its TL results; None for any other request."""
        now = datetime.now(UTC)

        def updates(*items: Any, chats: Sequence[Any] = ()) -> types.Updates:
            return types.Updates(updates=list(items), users=[], chats=list(chats), date=now, seq=0)

        if isinstance(request, functions.messages.SendMessageRequest) and request.schedule_date is not None:
            # A scheduled message has its own id, announced as updateNewScheduledMessage.
            message = self._ours(request, date=request.schedule_date, message=request.message, from_scheduled=True)
            return updates(
                types.UpdateMessageID(message.id, request.random_id), types.UpdateNewScheduledMessage(message)
            )
        if isinstance(request, (functions.messages.GetMessagesRequest, functions.channels.GetMessagesRequest)):
            ids = [getattr(i, "id", i) for i in request.id]  # Telethon passes ints; they become InputMessageID
            found = [self.stored.get(i) or types.MessageEmpty(id=i, peer_id=None) for i in ids]
            return types.messages.Messages(messages=found, topics=[], chats=[GROUP, SUPERGROUP], users=[ME, ALICE, BOB])
        if isinstance(request, functions.messages.GetPollResultsRequest):
            media = self.stored[request.msg_id].media
            results = self.poll_counts.get(request.msg_id, media.results)
            peer = utils.get_peer(request.peer)
            return updates(types.UpdateMessagePoll(media.poll.id, results, peer=peer, msg_id=request.msg_id))
        if isinstance(request, functions.messages.GetScheduledHistoryRequest):
            return types.messages.Messages(messages=self.scheduled, topics=[], chats=[], users=[ME])
        if isinstance(request, functions.messages.DeleteScheduledMessagesRequest):
            return updates(types.UpdateDeleteScheduledMessages(utils.get_peer(request.peer), list(request.id)))
        if isinstance(request, functions.messages.ReadHistoryRequest):
            return types.messages.AffectedMessages(pts=3, pts_count=0)
        if isinstance(request, functions.channels.ReadHistoryRequest):
            return True
        if isinstance(request, functions.messages.GetStickersRequest):
            stickers = self.stickers.get(request.emoticon, [sticker(request.emoticon)])
            return types.messages.Stickers(hash=1, stickers=stickers)
        if isinstance(request, functions.messages.SendMediaRequest):  # a sticker, a photo, a file, a poll
            return updates(*self._sent_document(request, now, "?"))
        if isinstance(request, functions.messages.ForwardMessagesRequest):  # one new message per forwarded one
            return updates(*itertools.chain.from_iterable(self._sent(request, r, now) for r in request.random_id))
        if isinstance(request, functions.contacts.ResolveUsernameRequest):
            if request.username == GIF_BOT.username:
                return types.contacts.ResolvedPeer(peer=types.PeerUser(GIF_BOT.id), chats=[], users=[GIF_BOT])
            if request.username != JOINABLE.username:
                raise errors.UsernameNotOccupiedError(request=request)
            return types.contacts.ResolvedPeer(peer=types.PeerChannel(JOINABLE.id), chats=[JOINABLE], users=[])
        if isinstance(request, functions.messages.GetInlineBotResultsRequest):  # @gif's search: one animation
            found = types.BotInlineMediaResult(
                id="gif-1", type="gif", send_message=types.BotInlineMessageMediaAuto(message=""), document=sticker("🎞")
            )
            return types.messages.BotResults(query_id=4242, results=[found], cache_time=0, users=[GIF_BOT])
        if isinstance(request, functions.messages.SendInlineBotResultRequest):  # @gif's animation, sent
            return updates(*self._sent_document(request, now, "🎞"))
        if isinstance(request, functions.messages.CheckChatInviteRequest):
            return types.ChatInviteAlready(chat=JOINABLE)
        if isinstance(
            request,
            (
                functions.messages.ImportChatInviteRequest,
                functions.channels.JoinChannelRequest,
                functions.channels.LeaveChannelRequest,
                functions.messages.DeleteChatUserRequest,
            ),
        ):
            return updates(chats=[JOINABLE])
        if isinstance(request, (functions.messages.SearchRequest, functions.messages.SearchGlobalRequest)):
            return types.messages.Messages(
                messages=self.found, topics=[], chats=[GROUP, SUPERGROUP, CHANNEL], users=[ME, ALICE, BOB]
            )
        return None

    def _sent_document(self, request: Any, now: datetime, emoji: str) -> tuple[Any, Any]:
        """The updates Telegram answers a sent document with: the id for our ``random_id``, the new message."""
        return self._sent(request, request.random_id, now, media=types.MessageMediaDocument(document=sticker(emoji)))

    def _sent(self, request: Any, random_id: int, now: datetime, media: Any = None) -> tuple[Any, Any]:
        """The updates Telegram answers one new message of ours with: its id for ``random_id``, the message."""
        message = self._ours(request, date=now, message="", media=media)
        channel = isinstance(message.peer_id, types.PeerChannel)
        new = (types.UpdateNewChannelMessage if channel else types.UpdateNewMessage)(message, pts=1, pts_count=1)
        return types.UpdateMessageID(message.id, random_id), new

    def _ours(self, request: Any, **fields: Any) -> types.Message:
        """Our new message in the chat ``request`` names (a forward: its destination), with the next id."""
        peer = request.to_peer if isinstance(request, functions.messages.ForwardMessagesRequest) else request.peer
        return types.Message(id=next(self._ids), peer_id=utils.get_peer(peer), out=True, **fields)


def sticker(emoji: str) -> types.Document:
    """A sticker document as Telegram describes one (what messages.getStickers lists)."""
    return types.Document(
        id=5550001, access_hash=5550002, file_reference=b"ref", date=datetime(2024, 1, 1, tzinfo=UTC),
        mime_type="image/webp", size=1234, dc_id=2,
        attributes=[types.DocumentAttributeSticker(alt=emoji, stickerset=types.InputStickerSetEmpty())],
    )  # fmt: skip
