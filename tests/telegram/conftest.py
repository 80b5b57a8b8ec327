"""Real Telethon, no network: a TelegramClient whose only override is ``_call``.

Updates are real TL objects handed to the client's own dispatcher (``client._dispatch_update``), so the
handlers run exactly as they do live. Outgoing requests are recorded and answered with real TL results.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from telethon import TelegramClient, errors, functions, utils
from telethon.sessions import MemorySession
from telethon.tl import types

from teleton.gateway.contract import IncomingMessage
from teleton.storage import Database
from teleton.telegram.gateway import GatewaySettings, TelegramGateway
from teleton.telegram.receive.dispatch import DebounceConfig
from teleton.telegram.receive.policy import PolicyConfig

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


class RecordingClient(TelegramClient):
    """A real, unconnected client: every request Telethon would send is recorded and answered here."""

    def __init__(self) -> None:
        super().__init__(MemorySession(), api_id=1, api_hash="0" * 32)
        self.requests: list[Any] = []
        self.failures: list[BaseException] = []  # raised, in order, by the next requests
        self.fail_when: Callable[[Any], BaseException | None] | None = None
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
        if isinstance(request, functions.bots.SetBotCommandsRequest):
            return True
        if isinstance(request, functions.channels.GetChannelsRequest):
            raise errors.ChannelInvalidError(request=request)  # what Telegram says for a chat we cannot see
        raise AssertionError(f"unexpected request in test: {type(request).__name__}")

    def sent(self) -> list[Any]:
        return [r for r in self.requests if isinstance(r, functions.messages.SendMessageRequest)]

    def of(self, kind: type) -> list[Any]:
        return [r for r in self.requests if isinstance(r, kind)]

    def answer_chat_tools(self, request: Any) -> Any:
        """What Telegram answers to the requests of the chat tools (polls, the schedule, stickers, joining,
        leaving, search), as its TL results; None for any other request."""
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
        if isinstance(request, functions.messages.SendMediaRequest):  # a sticker
            return updates(*self._sent_document(request, now, "?"))
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
        message = self._ours(request, date=now, message="", media=types.MessageMediaDocument(document=sticker(emoji)))
        channel = isinstance(message.peer_id, types.PeerChannel)
        new = (types.UpdateNewChannelMessage if channel else types.UpdateNewMessage)(message, pts=1, pts_count=1)
        return types.UpdateMessageID(message.id, request.random_id), new

    def _ours(self, request: Any, **fields: Any) -> types.Message:
        """Our new message in the chat ``request`` names, with the next id."""
        return types.Message(id=next(self._ids), peer_id=utils.get_peer(request.peer), out=True, **fields)


def sticker(emoji: str) -> types.Document:
    """A sticker document as Telegram describes one (what messages.getStickers lists)."""
    return types.Document(
        id=5550001, access_hash=5550002, file_reference=b"ref", date=datetime(2024, 1, 1, tzinfo=UTC),
        mime_type="image/webp", size=1234, dc_id=2,
        attributes=[types.DocumentAttributeSticker(alt=emoji, stickerset=types.InputStickerSetEmpty())],
    )  # fmt: skip


_msg_ids = itertools.count(1)


def next_id() -> int:
    return next(_msg_ids)


def peer_of(chat: Any) -> Any:
    if isinstance(chat, types.User):
        return types.PeerUser(chat.id)
    if isinstance(chat, types.Chat):
        return types.PeerChat(chat.id)
    return types.PeerChannel(chat.id)


def new_message(
    chat: Any,
    sender: Any | None,
    text: str,
    *,
    msg_id: int | None = None,
    out: bool = False,
    entities: list[Any] | None = None,
    reply_to: int | None = None,
    mentioned: bool = False,
    media: Any = None,
    fwd_from: Any = None,
    post: bool = False,
    extra: tuple[Any, ...] = (),
) -> types.UpdateNewMessage | types.UpdateNewChannelMessage:
    """An update carrying one message, with the entities Telegram would attach."""
    msg = types.Message(
        id=msg_id if msg_id is not None else next_id(),
        peer_id=peer_of(chat),
        date=datetime.now(UTC),
        message=text,
        out=out,
        mentioned=mentioned,
        post=post,
        from_id=types.PeerUser(sender.id) if sender is not None else None,
        entities=entities,
        reply_to=types.MessageReplyHeader(reply_to_msg_id=reply_to) if reply_to else None,
        media=media,
        fwd_from=fwd_from,
    )
    cls = types.UpdateNewChannelMessage if isinstance(chat, types.Channel) else types.UpdateNewMessage
    update = cls(message=msg, pts=1, pts_count=1)
    return attach(update, chat, sender, *extra)


def attach(update: Any, *entities: Any) -> Any:
    update._entities = {utils.get_peer_id(e): e for e in entities if e is not None}
    return update


@dataclass
class Agent:
    """The agent side of the contract: records each message it is handed, with what the archive held then."""

    db: Database
    seen: list[IncomingMessage] = field(default_factory=list)
    archived_first: list[bool] = field(default_factory=list)
    delay: float = 0.0

    async def __call__(self, msg: IncomingMessage) -> None:
        row = await self.db.fetchone(
            "select 1 from tg_messages where chat_id = ? and message_id = ?", (msg.chat.id, msg.message_id)
        )
        self.archived_first.append(row is not None)
        self.seen.append(msg)
        if self.delay:
            await asyncio.sleep(self.delay)


def make_settings(**policy: Any) -> GatewaySettings:
    defaults: dict[str, Any] = dict(dm_policy="open", group_policy="open", admin_ids=[ADMIN.id], require_mention=True)
    defaults.update(policy)
    limits = {k: defaults.pop(k) for k in ("rate_limit_per_chat", "rate_limit_global") if k in defaults}
    return GatewaySettings(
        policy=PolicyConfig.build(**defaults),
        debounce=DebounceConfig(window_s=0.05, max_factor=3, max_messages=20),
        flood_wait_max_s=5,
        typing_indicator=False,
        **limits,
    )


@dataclass
class GatewayHarness:
    """Drives the real TelegramGateway: Telethon TL updates in, a recording client for what goes out."""

    client: RecordingClient
    gateway: TelegramGateway
    agent: Agent
    db: Database

    async def dispatch(self, *updates: Any) -> None:
        for update in updates:
            await self.client._dispatch_update(update)

    async def settle(self) -> None:
        await self.gateway.batcher.drain()
        assert self.gateway.dispatcher is not None
        await self.gateway.dispatcher.idle()

    async def rows(self, chat_id: int | None = None) -> list[Any]:
        if chat_id is None:
            return await self.db.fetchall("select * from tg_messages order by id")
        return await self.db.fetchall("select * from tg_messages where chat_id = ? order by id", (chat_id,))


async def make_harness(db: Database, **policy: Any) -> GatewayHarness:
    client = RecordingClient()
    gateway = TelegramGateway(client, db, make_settings(**policy))
    gateway.set_me(ME)
    agent = Agent(db)
    gateway.on_message(agent)
    gateway.install()
    # What Telegram would have told us about these peers before (the entity cache of a live session).
    client.session.process_entities(
        types.contacts.ResolvedPeer(
            peer=types.PeerUser(ALICE.id), chats=[GROUP, SUPERGROUP, CHANNEL], users=[ME, ALICE, BOB, OTHER_BOT, ADMIN]
        )
    )
    return GatewayHarness(client, gateway, agent, db)


@pytest.fixture
async def harness(db: Database):
    h = await make_harness(db)
    yield h
    await h.gateway.stop(grace_s=1)


class HashingEmbedder:
    """An EmbeddingProvider by feature hashing: words → 384 buckets, L2-normalised, on its own thread.

    Real vectors (similar texts are near) at a cost the 5,000-message burst can afford on two loaded cores;
    the local ONNX model is exercised by a smaller test and by scripts/bench_ingest.py.
    """

    model_id = "test-hashing-384"
    dims = 384

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-embed")

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.encode, list(texts))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % self.dims] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    def close(self) -> None:
        self._executor.shutdown(wait=False)
