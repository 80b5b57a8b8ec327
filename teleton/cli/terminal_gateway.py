"""The Gateway contract in a terminal, for ``teleton chat``: the agent talks to you as if in a DM.

Messages the agent sends are rendered with rich (Markdown) and archived like Telegram messages, so the
agent's feed, recent-messages context and memory work exactly as they do on Telegram. A local file can be
attached to a message (``/attach``): the agent downloads it as it would a Telegram photo, voice note or
document. Actions that need Telegram (polls, moderation) fail with a clear ``GatewayError`` the model is
told about.
"""

from __future__ import annotations

import itertools
import mimetypes
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from teleton.gateway.contract import (
    ChatAction,
    ChatInfo,
    GatewayError,
    IncomingMessage,
    MediaInfo,
    SendOptions,
    SentMessage,
    UserInfo,
)
from teleton.gateway.local import TextStandIns, copy_media
from teleton.memory.feed import archive as fa
from teleton.memory.feed import message_life as life
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

TERMINAL_CHAT_ID = 1  # not a real Telegram chat, so terminal messages never collide with archived ones
AGENT = UserInfo(id=0, first_name="Teleton", username=None)
# How the terminal's user is archived and recalled when the archive knows no name for the owner: "Owner: …"
# beside the agent's own "you: …" (once "You", which read as the agent itself).
OWNER_NAME = "Owner"


class TerminalGateway(TextStandIns):
    def __init__(
        self,
        console: Console | None = None,
        *,
        db: Database | None = None,
        user: UserInfo | None = None,
        chat_id: int = TERMINAL_CHAT_ID,
        me: UserInfo = AGENT,
        on_archived: Callable[[], None] | None = None,
    ) -> None:
        self.console = console or Console()
        self.db = db
        self.me: UserInfo | None = me
        self.user = user or UserInfo(id=chat_id, first_name=OWNER_NAME)
        self.chat = ChatInfo(id=chat_id, type="dm", title="terminal")
        self.sent: list[SentMessage] = []
        self.on_archived = on_archived  # wakes the feed embedder, as in the daemon
        # Whether a text already reached the screen as it streamed (then it is archived, not printed again).
        self.streamed: Callable[[str], bool] = lambda text: False
        self._ids = itertools.count(1)
        self._attachments: dict[tuple[int, int], Path] = {}

    async def start(self) -> None:
        """Continue message ids after what a previous terminal session archived; lines archived as "You" by
        earlier versions are the user's name from now on."""
        if self.db is None:
            return

        def _start(conn: Connection) -> int | None:
            fa.rename_sender(conn, self.chat.id, "You", self.user.display_name)
            return fa.last_message_id(conn, self.chat.id)

        last = await self.db.write(_start)
        self._ids = itertools.count((last or 0) + 1)

    async def incoming(self, text: str, attachment: Path | None = None) -> IncomingMessage:
        """Archive a line the user typed (with a local file attached) and return it as the agent receives it."""
        media = None if attachment is None else attached(attachment)
        msg = IncomingMessage(
            chat=self.chat, sender=self.user, message_id=next(self._ids), text=text, date=time.time(),
            media_kind=media.kind if media else None, media=media,
        )  # fmt: skip
        if attachment is not None:
            self.attach(msg.chat.id, msg.message_id, attachment)
        await self._archive(self.chat.id, msg.message_id, text, sender=self.user, outgoing=False, media=media)
        return msg

    def attach(self, chat_id: int, message_id: int, path: Path) -> None:
        """``path`` is the file of that message: what ``download_media`` copies."""
        self._attachments[(chat_id, message_id)] = path

    async def _send(self, chat_id: int, text: str, options: SendOptions) -> SentMessage:
        # ``once`` needs no network id here: the terminal session has no crash to resend after; no topics.
        message_id = next(self._ids)
        sent = SentMessage(chat_id=chat_id, message_id=message_id, text=text, parts=(message_id,))
        await self._archive(chat_id, sent.message_id, text, sender=self.me, outgoing=True)
        self.sent = [*self.sent[-99:], sent]  # the last ones, for tests and a session of months
        if chat_id == self.chat.id and self.streamed(text):
            return sent
        title = "Teleton" if chat_id == self.chat.id else f"Teleton → chat {chat_id}"
        shown = Text(text) if options.plain else Markdown(text)
        self.console.print(Panel(shown, title=title, title_align="left", border_style="cyan"))
        return sent

    async def send_choice(self, chat_id: int, text: str, choices: Sequence[tuple[str, str]]) -> SentMessage:
        """Plain text, never rendered as Markdown (the text names the commands to type)."""
        sent = SentMessage(chat_id=chat_id, message_id=next(self._ids), text=text)
        await self._archive(chat_id, sent.message_id, text, sender=self.me, outgoing=True)
        self.sent = [*self.sent[-99:], sent]
        self.console.print(
            Panel(Text(text), title="Teleton (waiting for you)", title_align="left", border_style="yellow")
        )
        return sent

    async def edit_message(self, chat_id: int, message_id: int, text: str) -> None:
        self.console.print(Panel(Markdown(text), title=f"(edited #{message_id})", border_style="cyan"))

    async def delete_messages(self, chat_id: int, message_ids: Sequence[int]) -> None:
        self.console.print(f"[dim](deleted {', '.join(map(str, message_ids))})[/dim]")

    async def forward_message(self, from_chat_id: int, message_id: int, to_chat_id: int) -> SentMessage:
        raise GatewayError("forwarding needs Telegram; not available in the terminal")

    async def pin_message(self, chat_id: int, message_id: int, *, unpin: bool = False) -> None:
        self.console.print(f"[dim]({'unpinned' if unpin else 'pinned'} #{message_id})[/dim]")

    async def react(self, chat_id: int, message_id: int, emoji: str) -> None:
        self.console.print(f"[dim](reacted {emoji} to #{message_id})[/dim]")

    async def send_poll(self, chat_id: int, question: str, options: Sequence[str]) -> SentMessage:
        text = question + "\n" + "\n".join(f"- {o}" for o in options)
        return await self.send_message(chat_id, text)

    async def send_file(
        self, chat_id: int, path: Path, *, caption: str = "", voice_note: bool = False, reply_to: int | None = None
    ) -> SentMessage:
        kind = "voice message" if voice_note else "file"
        return await self.send_message(chat_id, f"[{kind}: {path}] {caption}".strip())

    async def download_media(self, chat_id: int, message_id: int, dest_dir: Path, max_bytes: int) -> Path:
        source = self._attachments.get((chat_id, message_id))
        return await copy_media(
            source, dest_dir, max_bytes, failed="cannot read the attached file", prefix=f"{message_id}-"
        )

    async def transcribe_audio(self, chat_id: int, message_id: int) -> str:
        raise GatewayError("Telegram's transcription is not available in the terminal")

    async def get_chat(self, chat_id: int) -> ChatInfo:
        if chat_id == self.chat.id:
            return self.chat
        raise GatewayError(f"chat {chat_id} is not reachable from the terminal")

    async def get_user(self, user: int | str) -> UserInfo:
        if user in (self.user.id, self.user.username):
            return self.user
        raise GatewayError(f"user {user} is not reachable from the terminal")

    async def list_dialogs(self, limit: int = 50) -> list[ChatInfo]:
        return [self.chat]

    async def get_participants(self, chat_id: int, limit: int = 200) -> list[UserInfo]:
        return [self.user] + ([self.me] if self.me else [])

    async def kick(self, chat_id: int, user_id: int) -> None:
        raise GatewayError("moderation needs Telegram; not available in the terminal")

    async def ban(self, chat_id: int, user_id: int, *, unban: bool = False) -> None:
        raise GatewayError("moderation needs Telegram; not available in the terminal")

    async def typing(self, chat_id: int, topic_id: int | None = None, action: ChatAction = "typing") -> None:
        pass  # the chat command shows its own spinner

    # The chat tools act on a Telegram account: polls, its schedule, reading, chats to join and its search.
    async def poll_results(self, chat_id: int, message_id: int) -> tuple[str, list[tuple[str, int | None]], bool]:
        raise GatewayError("poll results need Telegram; not available in the terminal")

    async def close_poll(self, chat_id: int, message_id: int) -> None:
        raise GatewayError("closing a poll needs Telegram; not available in the terminal")

    async def list_scheduled(self, chat_id: int) -> list[tuple[int, float, str]]:
        raise GatewayError("Telegram's scheduled messages are not available in the terminal")

    async def schedule_message(self, chat_id: int, text: str, when: float) -> SentMessage:
        raise GatewayError("Telegram's scheduled messages are not available in the terminal (schedule_task is)")

    async def cancel_scheduled(self, chat_id: int, message_ids: Sequence[int]) -> None:
        raise GatewayError("Telegram's scheduled messages are not available in the terminal")

    async def mark_read(self, chat_id: int) -> None:
        raise GatewayError("marking a Telegram chat read is not available in the terminal")

    async def join_chat(self, link: str) -> ChatInfo:
        raise GatewayError("joining a chat needs Telegram; not available in the terminal")

    async def leave_chat(self, chat: int | str) -> None:
        raise GatewayError("leaving a chat needs Telegram; not available in the terminal")

    async def search_telegram(self, query: str, chat_id: int | None = None, limit: int = 20) -> list[IncomingMessage]:
        raise GatewayError("Telegram's own search is not available in the terminal; search_messages reads the archive")

    async def _archive(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        *,
        sender: UserInfo | None,
        outgoing: bool,
        media: MediaInfo | None = None,
    ) -> None:
        if self.db is None:
            return
        record = fa.MessageRecord(
            chat_id=chat_id,
            message_id=message_id,
            date=time.time(),
            text=text,
            sender_id=sender.id if sender else None,
            sender_name=sender.display_name if sender else "",
            is_outgoing=outgoing,
            media_kind=media.kind if media else None,
        )
        now = time.time()
        chat = ChatInfo(id=self.chat.id, type="dm", title=self.chat.title)

        def _write(conn: object) -> None:
            if chat_id == chat.id:
                fa.upsert_chat(conn, chat, now)
            fa.insert_message(conn, record, agent_state=life.STATE_TERMINAL)

        await self.db.write(_write)
        if self.on_archived is not None:
            self.on_archived()


def attached(path: Path) -> MediaInfo:
    """A local file as Telegram would declare it: an image is a photo, an OGG/Opus file a voice note."""
    mime = mimetypes.guess_type(path.name)[0] or ""
    suffix = path.suffix.lower()
    if suffix in (".ogg", ".oga", ".opus"):
        kind, mime = "voice", "audio/ogg"
    elif mime.startswith("image/"):
        kind = "photo"
    elif mime.startswith(("audio/", "video/")):
        kind = "audio"
    else:
        kind = "document"
    try:
        size = path.stat().st_size
    except OSError:
        size = None
    return MediaInfo(kind=kind, size=size, mime_type=mime, file_name=path.name)
