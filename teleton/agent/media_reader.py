"""What a message's photo, voice note or document says, before the turn reads the message.

A message with a file the agent can read is downloaded into ``downloads/<chat id>/`` (that chat's label,
0600) — never when its declared size is over the cap for its kind — and read: an image goes to the model as
an image block and gets a one-line description from the utility model; audio is transcribed; a document's
text is extracted. What was read joins the caption in the archive (so ``feed search`` and memory find "the
photo of the receipt" later) and in what the model reads, marked for what it is. Anything that cannot be
read becomes a one-line note to the model and the log, never a failed turn. Audio that cannot be heard
because the ``voice`` extra is not installed also tells the owner, once per run, how to install it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from teleton.config.schema import Config, MediaConfig
from teleton.gateway.contract import Gateway, GatewayError, IncomingMessage, MediaInfo
from teleton.llm.client import LLMClient
from teleton.media import transcribe_http
from teleton.media.documents import extract_text, kind_from_name
from teleton.media.errors import MediaError
from teleton.media.images import image_block, prepare_image
from teleton.media.transcribe_local import LocalSettings, from_settings
from teleton.media.transcription import Transcriber
from teleton.memory.feed import archive as fa
from teleton.providers.extras import MissingExtra, install_command
from teleton.storage import Database
from teleton.text.lines import reason
from teleton.tools.families.telegram_common import Refused, download_to_chat

log = structlog.get_logger(__name__)

MB = 1024 * 1024
# Kinds of Telegram media by how they are read; a document is read by its type (an image file is an image).
FAMILIES = {"photo": "image", "sticker": "image", "voice": "audio", "audio": "audio", "video_note": "audio"}
SPOKEN = {"voice": "voice note", "audio": "audio", "video_note": "video note"}
BACKLOG = 20  # unaddressed media waiting to be read (media.describe_all)
ARCHIVED_CHARS = 200_000  # of a document's text, in the archive row (the whole text is in the workspace)
DESCRIBE = (
    "Describe this image in one line of at most 25 words, for finding it again later: what it shows, and any "
    "text, numbers or names on it. Answer with the line only."
)

# What the owner is told, once per run, when audio arrives and local transcription lacks the voice extra.
VOICE_NOTICE = (
    f"A voice note arrived and I could not hear it: install teleton[voice] to hear voice notes "
    f"({install_command('voice')}, then restart Teleton)."
)

Describe = Callable[[dict[str, Any]], Awaitable[str]]
TellOwner = Callable[[str], Awaitable[object]]


@dataclass(frozen=True)
class MediaSettings:
    enabled: bool = True
    max_bytes: tuple[tuple[str, int], ...] = (("image", 10 * MB), ("audio", 25 * MB), ("document", 20 * MB))
    max_audio_s: float = 30 * 60.0
    image_max_side: int = 1568
    excerpt_chars: int = 4000

    @classmethod
    def from_config(cls, media: MediaConfig) -> MediaSettings:
        caps = (("image", media.max_image_mb), ("audio", media.max_audio_mb), ("document", media.max_document_mb))
        return cls(
            enabled=media.enabled,
            max_bytes=tuple((family, int(mb * MB)) for family, mb in caps),
            max_audio_s=media.max_audio_minutes * 60,
            image_max_side=media.image_max_side,
            excerpt_chars=media.document_excerpt_chars,
        )

    def cap(self, family: str) -> int:
        return dict(self.max_bytes)[family]


@dataclass(frozen=True)
class Reading:
    """What the file said: ``text`` is the message's new text (caption + marked content); ``image`` an image
    block for this turn's model request; ``archive`` whether ``text`` should replace the archived text."""

    text: str
    image: dict[str, Any] | None = None
    archive: bool = True


def family(media: MediaInfo) -> str:
    if media.kind in FAMILIES:
        return FAMILIES[media.kind]
    if media.mime_type.startswith("image/"):
        return "image"
    if media.mime_type.startswith(("audio/", "video/")):
        return "audio"
    return "document"


class MediaReader:
    """Reads the media of the messages a turn answers (``media.*`` settings)."""

    def __init__(
        self,
        db: Database,
        gateway: Gateway,
        workspace: Path,
        settings: MediaSettings,
        *,
        transcriber: Transcriber | None = None,
        describe: Describe | None = None,
        telegram_transcription: bool = False,
        voice_missing: MissingExtra | None = None,
        tell_owner: TellOwner | None = None,
    ) -> None:
        self.db, self.gateway, self.workspace, self.settings = db, gateway, workspace, settings
        self.transcriber = transcriber
        self.describe = describe
        self.telegram_transcription = telegram_transcription  # media.transcription.provider: telegram
        # Why there is no transcriber when local transcription is configured without the voice extra.
        self.voice_missing = voice_missing
        self.tell_owner = tell_owner
        self._owner_told = False
        self._later: set[asyncio.Task[None]] = set()
        self._one_at_a_time = asyncio.Semaphore(1)

    def read_later(self, msg: IncomingMessage) -> None:
        """``media.describe_all``: read a message nobody asked about into the archive, one at a time, in the
        background; past ``BACKLOG`` waiting, more are archived unread (a group sharing an album costs no
        more than ``BACKLOG`` reads)."""
        if len(self._later) >= BACKLOG:
            log.info("media_backlog_full", chat_id=msg.chat.id, message_id=msg.message_id)
            return
        task = asyncio.ensure_future(self._read_into_archive(msg))
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def drain(self) -> None:
        """Wait for the background reads started so far (tests, shutdown)."""
        while self._later:
            await asyncio.gather(*list(self._later), return_exceptions=True)

    async def _read_into_archive(self, msg: IncomingMessage) -> None:
        async with self._one_at_a_time:
            try:
                reading = await self.read(msg)
                if reading is not None and reading.archive:
                    await self.db.write(lambda conn: fa.set_text(conn, msg.chat.id, msg.message_id, reading.text))
            except Exception:  # a background read must never take anything else down
                log.exception("media_read_later_failed", chat_id=msg.chat.id, message_id=msg.message_id)

    async def read(self, msg: IncomingMessage) -> Reading | None:
        """The message with what its file says, or None when it has none the agent reads."""
        media = msg.media
        if media is None or not self.settings.enabled:
            return None
        kind = family(media)
        try:
            self._check_declared(media, kind)
            if kind == "audio" and self.telegram_transcription:  # Telegram has the file: nothing to download
                said = await self.gateway.transcribe_audio(msg.chat.id, msg.message_id)
                return Reading(text=_with(msg.text, _transcribed(media, media.duration_s, None, said)))
            path = await download_to_chat(
                self.gateway, self.workspace, msg.chat.id, msg.message_id, self.settings.cap(kind)
            )
            data = await asyncio.to_thread(path.read_bytes)
            if kind == "image":
                return await self._image(msg, data)
            if kind == "audio":
                return await self._audio(msg, data, path.name)
            return await self._document(msg, data, path)
        except (MediaError, GatewayError, Refused, OSError) as exc:
            why = reason(exc, 200)
            log.warning("media_not_read", chat_id=msg.chat.id, message_id=msg.message_id, kind=media.kind, why=why)
            return Reading(text=_with(msg.text, f"[{_name(media)} not read: {why}]"), archive=False)

    def _check_declared(self, media: MediaInfo, kind: str) -> None:
        """Refuse before any byte is downloaded: what Telegram declares is checked against the caps."""
        if media.size is not None and media.size > self.settings.cap(kind):
            raise MediaError(f"{_size(media.size)} is over the {_size(self.settings.cap(kind))} limit for {kind} files")
        if kind == "audio" and media.duration_s is not None and media.duration_s > self.settings.max_audio_s:
            raise MediaError(f"{_clock(media.duration_s)} long, over the {_clock(self.settings.max_audio_s)} limit")
        if kind == "document" and media.file_name and kind_from_name(media.file_name, media.mime_type) is None:
            raise MediaError(f"{media.file_name}: not a document kind I can read (PDF, docx, csv or text)")

    async def _image(self, msg: IncomingMessage, data: bytes) -> Reading:
        side = self.settings.image_max_side
        prepared = await asyncio.to_thread(prepare_image, data, max_side=side)
        block = image_block(prepared)
        line = ""
        if self.describe is not None:
            try:
                line = " ".join((await self.describe(block)).split())[:300]
            except Exception as exc:  # the model still sees the image; only the archive line is missing
                log.warning("media_describe_failed", chat_id=msg.chat.id, error=str(exc)[:200])
        marker = f"[{_name(msg.media)}: {line}]" if line else f"[{_name(msg.media)}]"
        return Reading(text=_with(msg.text, marker), image=block, archive=bool(line))

    async def _audio(self, msg: IncomingMessage, data: bytes, filename: str) -> Reading:
        if self.transcriber is None and self.voice_missing is not None:
            await self._tell_owner_once()
            raise MediaError(f"I could not hear it: {self.voice_missing}")
        if self.transcriber is None:
            raise MediaError("transcription is off (media.transcription.provider)")
        transcript = await self.transcriber.transcribe(data, filename=filename)
        marker = _transcribed(msg.media, transcript.duration_s, transcript.language, transcript.text)
        return Reading(text=_with(msg.text, marker))

    async def _tell_owner_once(self) -> None:
        """VOICE_NOTICE to the owner, the first time only: a failed send is logged, not retried."""
        if self._owner_told or self.tell_owner is None:
            return
        self._owner_told = True  # before the await: two voice notes at once still make one notice
        try:
            await self.tell_owner(VOICE_NOTICE)
        except Exception as exc:  # the note itself is still read (as unheard) and answered
            log.warning("voice_notice_not_sent", error=f"{type(exc).__name__}: {str(exc)[:200]}")

    async def _document(self, msg: IncomingMessage, data: bytes, path: Path) -> Reading:
        media = msg.media
        assert media is not None
        name = media.file_name or path.name
        doc = await asyncio.to_thread(extract_text, data, filename=name, mime_type=media.mime_type or None)
        pages = f", {doc.pages} pages" if doc.pages else ""
        head = f"[document {name}{pages}, text extracted{'; cut at the size limit' if doc.truncated else ''}]"
        if doc.note:
            head += f"\n[{doc.note}]"
        return Reading(text=_with(msg.text, f"{head}\n{doc.text[:ARCHIVED_CHARS]}".rstrip()))


def _with(caption: str, marker: str) -> str:
    return f"{caption.strip()}\n{marker}" if caption.strip() else marker


def _transcribed(media: MediaInfo | None, duration_s: float | None, language: str | None, said: str) -> str:
    length = f", {_clock(duration_s)}" if duration_s else ""
    lang = f", {language}" if language else ""
    return f"[{_name(media)}{length}{lang}, transcript]: {said.strip() or '(no speech)'}"


def _name(media: MediaInfo | None) -> str:
    if media is None:
        return "file"
    return SPOKEN.get(media.kind, "photo" if media.kind == "photo" else media.kind.replace("_", " "))


def _size(n: int) -> str:
    return f"{n / 1024**3:.1f} GB" if n >= 1024**3 else f"{n / MB:.1f} MB" if n >= MB else f"{n / 1024:.0f} KB"


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def describer(llm: LLMClient) -> Describe:
    """The utility model's one-line description of an image (``llm``: the turn's ``LLMClient``)."""

    async def describe(block: dict[str, Any]) -> str:
        response = await llm.create(
            system="You describe images for a search index.",
            messages=[{"role": "user", "content": [block, {"type": "text", "text": DESCRIBE}]}],
            model=llm.settings.utility_model,
            max_tokens=120,
            temperature=0.2,
        )
        return response.text

    return describe


def transcriber_for(media: MediaConfig, scratch: Path | None = None) -> Transcriber | None:
    """The transcriber ``media.transcription`` names; None when off or when it cannot work (logged once:
    voice notes then reach the model as a note saying so, and ``teleton doctor`` names the fix).
    MissingExtra when local transcription lacks the voice extra: the caller says so (``media_reader``)."""
    t = media.transcription
    limit = media.max_audio_minutes * 60
    try:
        if t.provider == "local":
            # scratch: where the packaged model's two parts are joined (and checked) for a moment: not /tmp,
            # which may be RAM.
            settings = LocalSettings(max_duration_s=limit, scratch_dir=scratch)
            return from_settings(t.model, str(t.model_path) if t.model_path else None, settings)
        if t.provider == "openai_compatible":
            return transcribe_http.from_settings(
                preset_name=t.preset, base_url=t.base_url, model=t.model, api_key=t.api_key, max_duration_s=limit
            )
    except MissingExtra:
        raise
    except Exception as exc:  # a missing model file or key: the daemon runs on without transcription
        log.error("transcription_unavailable", provider=t.provider, error=reason(exc, 200))
    return None


def media_reader(
    config: Config, db: Database, gateway: Gateway, llm: LLMClient, tell_owner: TellOwner | None = None
) -> MediaReader | None:
    """The reader ``config.media`` asks for (None: media is not read); ``tell_owner`` sends the owner a notice."""
    if not config.media.enabled:
        return None
    try:
        transcriber, missing = transcriber_for(config.media, config.storage.data_dir), None
    except MissingExtra as exc:  # said at start by the factory, and to the owner with the first voice note
        transcriber, missing = None, exc
    return MediaReader(
        db,
        gateway,
        config.storage.workspace_dir,
        MediaSettings.from_config(config.media),
        transcriber=transcriber,
        # A utility model that cannot see images would describe the note that replaced it: no line at all.
        describe=describer(llm) if llm.utility_sees_images else None,
        telegram_transcription=config.media.transcription.provider == "telegram",
        voice_missing=missing,
        tell_owner=tell_owner,
    )
