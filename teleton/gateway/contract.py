"""What the agent sees of a chat network and what it may ask of it.

The gateways: Telegram (``telegram/gateway.py``), the terminal of ``teleton chat`` (``cli/terminal_gateway.py``)
and the loopback the fault tests drive (``daemon/loopback_gateway.py``). The agent,
the tools and the tests talk only to this contract, so none of them import Telethon.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from teleton.storage.reply_sends import new_random_base

ChatType = Literal["dm", "group", "channel"]
ChatAction = Literal["typing", "record_audio"]


@dataclass(frozen=True)
class ChatInfo:
    """A chat. ``id`` is the "marked" id used everywhere (archive, config, tools): a user's id for a DM,
    a negative id for a basic group, -100… for supergroups and channels. ``type`` "group" covers both
    kinds of group; "channel" is a broadcast channel (archived, never answered)."""

    id: int
    type: ChatType
    title: str = ""
    username: str | None = None
    member_count: int | None = None


@dataclass(frozen=True)
class UserInfo:
    id: int
    first_name: str = ""
    last_name: str = ""
    username: str | None = None
    phone: str | None = None
    is_bot: bool = False
    # A "min" user (Telegram's partial view) lacks username/phone: archived, it must not erase what we know.
    partial: bool = False

    @property
    def display_name(self) -> str:
        name = f"{self.first_name} {self.last_name}".strip()
        return name or (f"@{self.username}" if self.username else str(self.id))


@dataclass(frozen=True)
class MediaInfo:
    """What Telegram declares about a message's photo, voice note or file, before anything is downloaded."""

    kind: str  # photo, voice, audio, video_note, video, sticker, gif, document (``telegram.convert.media_kind``)
    size: int | None = None  # bytes, as declared: the size caps are checked against it before a download
    mime_type: str = ""
    file_name: str = ""
    duration_s: float | None = None


@dataclass(frozen=True)
class IncomingMessage:
    """A message the agent may act on, already archived when it reaches the agent."""

    chat: ChatInfo
    sender: UserInfo | None
    message_id: int
    text: str
    date: float
    is_outgoing: bool = False
    reply_to_id: int | None = None
    reply_to_us: bool = False
    mentions_us: bool = False
    media_kind: str | None = None
    media: MediaInfo | None = None  # set when the message carries a file the agent may read
    # Who wrote a forwarded message (a name or an id): its words are theirs, not the sender's (egress).
    forwarded_from: str | None = None
    # Group messages that arrived since the agent last spoke there and did not trigger a reply.
    earlier_context: Sequence[IncomingMessage] = field(default_factory=tuple)
    # The accepted messages this turn answers (a debounced group burst is one turn); empty: just this one.
    answering: tuple[int, ...] = ()
    # The forum topic it was written in (the topic's top message id); None: no topic, or the General one.
    topic_id: int | None = None
    # Set when the message was edited after it was answered: the messages the answer went out as (the new
    # answer is edited into the first; ``telegram/receive/afterwards.py``) and when they were sent.
    replaces: tuple[int, ...] = ()
    replaced_at: float = 0.0

    @property
    def answers(self) -> tuple[int, ...]:
        return self.answering or ((self.message_id,) if self.message_id > 0 else ())

    @property
    def thread(self) -> Thread:
        """The conversation it belongs to: its own session, lane and context (``Thread``)."""
        return Thread(self.chat.id, self.topic_id or 0)


@dataclass(frozen=True)
class Thread:
    """One conversation: a chat, or one topic of a forum (``topic`` 0: the chat's main line, which is also a
    forum's General topic). Sessions, turn lanes, /stop and a group's unanswered context are per thread."""

    chat_id: int
    topic: int = 0


@dataclass
class Once:
    """How a reply is made to arrive once even if it is sent again after a crash: part ``i`` of it goes out
    with the network's deduplication id ``random_base + i`` (Telegram's ``random_id``), and parts before
    ``parts_sent`` are known delivered and skipped. ``confirm(n)`` is awaited after each delivered part,
    with the count delivered so far, so the record can say where to resume. ``edits``: the streamed message
    part 0 is an edit of (``ReplyStreams``); a gateway that cannot edit, or finds it gone, sends part 0 as a
    new message with ``random_base``."""

    random_base: int
    parts_sent: int = 0
    confirm: Callable[[int], Awaitable[None]] | None = None
    edits: int | None = None


@dataclass(frozen=True)
class SentMessage:
    chat_id: int
    message_id: int
    text: str
    parts: tuple[int, ...] = ()  # every message it went out as now (a long text is split), in order


IncomingHandler = Callable[[IncomingMessage], Awaitable[object]]  # what it returns is not used


@dataclass(frozen=True)
class SendOptions:
    """``send_message``'s keywords as one value: what each gateway's ``_send`` is given. ``once`` is always
    set: a send the caller did not make resumable still gets its own random ids (one per part)."""

    once: Once
    reply_to: int | None = None
    topic_id: int | None = None
    plain: bool = False


class SendsMessages(Protocol):
    """``send_message`` written once for every gateway: each subclasses this and implements ``_send``."""

    async def send_message(
        self,
        chat_id: int,
        text: str,
        *,
        reply_to: int | None = None,
        once: Once | None = None,
        topic_id: int | None = None,
        plain: bool = False,
    ) -> SentMessage:
        """``text`` split as the network needs; with ``once``, each part is deduplicated by the network and
        parts already delivered are skipped (the returned message is then the first part sent now, or the
        first part of the reply if all went out before). ``topic_id``: every part lands in that forum topic.
        ``plain``: the text exactly as it is, never rendered as Markdown (a link's address must show)."""
        options = SendOptions(once or Once(new_random_base()), reply_to, topic_id, plain)
        return await self._send(chat_id, text, options)

    async def _send(self, chat_id: int, text: str, options: SendOptions) -> SentMessage: ...


class Gateway(SendsMessages, Protocol):
    """Actions the agent and its tools may take. Every method raises ``GatewayError`` on failure."""

    me: UserInfo | None

    async def send_choice(self, chat_id: int, text: str, choices: Sequence[tuple[str, str]]) -> SentMessage:
        """``text`` as plain text, exactly (never rendered as Markdown, never cut), with buttons where the
        network has them: (label, command); a press is that command typed by whoever pressed it. Without
        buttons the text alone is sent (it names the commands)."""
        ...

    async def edit_message(self, chat_id: int, message_id: int, text: str) -> None: ...

    async def delete_messages(self, chat_id: int, message_ids: Sequence[int]) -> None: ...

    async def forward_message(self, from_chat_id: int, message_id: int, to_chat_id: int) -> SentMessage: ...

    async def pin_message(self, chat_id: int, message_id: int, *, unpin: bool = False) -> None: ...

    async def react(self, chat_id: int, message_id: int, emoji: str) -> None: ...

    async def send_poll(self, chat_id: int, question: str, options: Sequence[str]) -> SentMessage: ...

    async def send_file(
        self, chat_id: int, path: Path, *, caption: str = "", voice_note: bool = False, reply_to: int | None = None
    ) -> SentMessage: ...

    async def download_media(self, chat_id: int, message_id: int, dest_dir: Path, max_bytes: int) -> Path: ...

    async def transcribe_audio(self, chat_id: int, message_id: int) -> str: ...

    async def get_chat(self, chat_id: int) -> ChatInfo: ...

    async def get_user(self, user: int | str) -> UserInfo: ...

    async def list_dialogs(self, limit: int = 50) -> list[ChatInfo]: ...

    async def get_participants(self, chat_id: int, limit: int = 200) -> list[UserInfo]: ...

    async def kick(self, chat_id: int, user_id: int) -> None: ...

    async def ban(self, chat_id: int, user_id: int, *, unban: bool = False) -> None: ...

    async def typing(self, chat_id: int, topic_id: int | None = None, action: ChatAction = "typing") -> None:
        """Show that the agent is at work in the chat (in forum topic ``topic_id``): "typing…", or "recording a
        voice message…" (``record_audio``) while a voice reply is made. Cosmetic: it may fail silently."""
        ...

    # -- what the chat tools ask (``tools/families/telegram_chat_tools.py``) ---------------------------------

    async def poll_results(self, chat_id: int, message_id: int) -> tuple[str, list[tuple[str, int | None]], bool]:
        """The poll in message ``message_id``: (its question, each option with its votes, whether it is closed).
        A count is None where the network does not show it (Telegram: to someone who has not voted yet)."""
        ...

    async def close_poll(self, chat_id: int, message_id: int) -> None:
        """Stop a poll the agent sent: nobody can vote any more, and its results stay."""
        ...

    async def list_scheduled(self, chat_id: int) -> list[tuple[int, float, str]]:
        """The messages waiting in the network's own schedule of a chat: (id, when it goes out, text), soonest
        first."""
        ...

    async def schedule_message(self, chat_id: int, text: str, when: float) -> SentMessage:
        """``text`` (one message) handed to the network, which sends it by itself at ``when`` (a Unix time);
        the id returned is the scheduled message's, which ``cancel_scheduled`` takes."""
        ...

    async def cancel_scheduled(self, chat_id: int, message_ids: Sequence[int]) -> None: ...

    async def mark_read(self, chat_id: int) -> None:
        """Every message of the chat marked as read (its unread count cleared)."""
        ...

    async def send_sticker(self, chat_id: int, emoji: str) -> SentMessage:
        """A sticker for ``emoji``: the first one the network offers for it."""
        ...

    async def send_gif(self, chat_id: int, query: str) -> SentMessage:
        """A GIF for ``query`` (words or an emoji): the first one the network's GIF search finds."""
        ...

    async def join_chat(self, link: str) -> ChatInfo:
        """Join the group or channel of an invite link (t.me/+HASH, t.me/joinchat/HASH) or a public @username
        (or t.me/username); the chat joined."""
        ...

    async def leave_chat(self, chat: int | str) -> None:
        """Leave a group or channel given by its id, @username or an invite link to it."""
        ...

    async def search_telegram(self, query: str, chat_id: int | None = None, limit: int = 20) -> list[IncomingMessage]:
        """The network's own search of one chat (every chat when ``chat_id`` is None), reaching past what the
        archive holds; what it finds is archived (never answered) and returned, newest first."""
        ...


@runtime_checkable
class ReplyStreams(Protocol):
    """A gateway that can show a reply while it is written (Telegram: one message, edited as text arrives).

    ``stream_start`` sends the first words as plain text (``random_id``: a fresh id; it is never sent
    again) and returns the message's id; ``stream_edit`` replaces them with more, at most once per
    ``stream_interval_s`` per chat by ``stream_clock`` (False: too soon, nothing sent) and raises
    ``StreamHalted`` when it must stop (a FloodWait, the message limit). The reply itself goes through
    ``send_message`` with ``Once.edits`` naming the message: part 0 (formatted) is edited in, the other
    parts are sent; ``stream_drop`` deletes a streamed message that is not the reply."""

    stream_interval_s: float

    def stream_clock(self) -> float: ...

    def streams_to(self, chat: ChatInfo) -> bool: ...

    async def stream_start(self, chat_id: int, text: str, *, random_id: int) -> int: ...

    async def stream_edit(self, chat_id: int, message_id: int, text: str) -> bool: ...

    async def stream_drop(self, chat_id: int, message_id: int) -> None: ...


class GatewayError(Exception):
    """An action failed in a way the agent should be told about (not a crash)."""


class StreamHalted(GatewayError):
    """A streamed reply must not be edited any more (a FloodWait, the message's length limit): what is left
    goes out with the final text, in one piece."""


class TurnDeferred(Exception):
    """A turn could not record its outcome (the database refuses writes: a full disk): its messages are
    neither answered nor failed yet, so they must be picked up again once storage works, not forgotten."""
