"""The ``openai_compatible`` transcriber: ``POST {base_url}/audio/transcriptions`` on any server speaking it
(OpenAI, Groq, faster-whisper-server / speaches, LocalAI, a llama.cpp whisper server; docs/media.md).

Plain httpx with the embedding endpoints' retry rule (``teleton/providers/http_retry.py``), and a ``retry-after``
longer than ``max_wait`` ends the attempt at once. The file goes as it came when the endpoint takes its format and
it fits one request; otherwise it is decoded (PyAV, the ``voice`` extra) and sent as WAV windows of at most
``window_s``, cut at pauses. ``verbose_json`` gives the language and duration; a server refusing it gets ``json``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from teleton.config.presets import PresetError, service_endpoint
from teleton.media.audio import AudioSource, check_duration, decode, probe, wav_bytes
from teleton.media.errors import MediaError
from teleton.media.transcription import DEFAULT_MAX_DURATION_S, Transcript, join_texts, split_at_silences
from teleton.providers import extras
from teleton.providers.http_retry import http_retrying, retry_after
from teleton.text.lines import reason

MAX_UPLOAD_BYTES = 25 * 1024 * 1024  # OpenAI's and Groq's (free tier) limit per request
WINDOW_S = 600.0  # 10 min of 16 kHz 16-bit WAV is 19 MB: under MAX_UPLOAD_BYTES
# What OpenAI accepts, by FFmpeg's demuxer name; anything else is re-encoded as WAV.
_UPLOAD_NAME = {
    "ogg": "audio.ogg",
    "mp3": "audio.mp3",
    "wav": "audio.wav",
    "flac": "audio.flac",
    "matroska,webm": "audio.webm",
    "mov,mp4,m4a,3gp,3g2,mj2": "audio.mp4",
}
_MIME = {".ogg": "audio/ogg", ".mp3": "audio/mpeg", ".wav": "audio/wav", ".flac": "audio/flac"}
_MIME |= {".webm": "audio/webm", ".mp4": "audio/mp4"}
# Whisper's language names (what verbose_json says) to ISO 639-1, so both transcribers report "ru", not "russian".
_LANGUAGE_CODES = dict(
    pair.split(":")[::-1]
    for pair in (
        "en:english zh:chinese de:german es:spanish ru:russian ko:korean fr:french ja:japanese pt:portuguese "
        "tr:turkish pl:polish ca:catalan nl:dutch ar:arabic sv:swedish it:italian id:indonesian hi:hindi "
        "fi:finnish vi:vietnamese he:hebrew uk:ukrainian el:greek ms:malay cs:czech ro:romanian da:danish "
        "hu:hungarian ta:tamil no:norwegian th:thai ur:urdu hr:croatian bg:bulgarian lt:lithuanian la:latin "
        "mi:maori ml:malayalam cy:welsh sk:slovak te:telugu fa:persian lv:latvian bn:bengali sr:serbian "
        "az:azerbaijani sl:slovenian kn:kannada et:estonian mk:macedonian br:breton eu:basque is:icelandic "
        "hy:armenian ne:nepali mn:mongolian bs:bosnian kk:kazakh sq:albanian sw:swahili gl:galician "
        "mr:marathi pa:punjabi si:sinhala km:khmer sn:shona yo:yoruba so:somali af:afrikaans oc:occitan "
        "ka:georgian be:belarusian tg:tajik sd:sindhi gu:gujarati am:amharic yi:yiddish lo:lao uz:uzbek "
        "fo:faroese ps:pashto tk:turkmen nn:nynorsk mt:maltese sa:sanskrit lb:luxembourgish my:myanmar "
        "bo:tibetan tl:tagalog mg:malagasy as:assamese tt:tatar haw:hawaiian ln:lingala ha:hausa ba:bashkir "
        "jw:javanese su:sundanese yue:cantonese"
    ).split()
)


class RetryLater(Exception):
    """The server said when to come back (``retry-after``), and it is longer than we are willing to wait."""


class HttpTranscriber:
    """A :class:`teleton.media.transcription.Transcriber` over an OpenAI-style transcription endpoint."""

    name = "openai_compatible"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        label: str | None = None,
        language: str | None = None,
        max_duration_s: float = DEFAULT_MAX_DURATION_S,
        max_upload_bytes: int = MAX_UPLOAD_BYTES,
        window_s: float = WINDOW_S,
        attempts: int = 4,
        max_wait: float = 20.0,
        timeout_s: float = 120.0,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.provider = f"{label or urlsplit(self.base_url).netloc}:{model}"
        self.language = language
        self.max_duration_s = max_duration_s
        self.max_upload_bytes = max_upload_bytes
        self.window_s = window_s
        self._attempts = attempts
        self._max_wait = max_wait
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=httpx.Timeout(timeout_s))
        self._format = "verbose_json"

    async def transcribe(self, audio: AudioSource, *, filename: str | None = None) -> Transcript:
        data = audio if isinstance(audio, bytes) else await asyncio.to_thread(_read, audio)
        if not extras.installed("av"):
            return await self._as_it_came(data)
        info = await asyncio.to_thread(probe, data)  # a corrupt file is refused before any upload
        if info.duration_s is not None:
            check_duration(info.duration_s, self.max_duration_s)
        upload_name = _UPLOAD_NAME.get(info.container)
        fits = info.duration_s is not None and info.duration_s <= self.window_s
        if upload_name and fits and len(data) <= self.max_upload_bytes:
            body = await self._post(data, upload_name)
            duration = float(body.get("duration") or info.duration_s or 0.0)
            language = _language(body) or self.language  # the one we asked for, when the server does not say
            return Transcript(str(body.get("text", "")).strip(), language, duration, self.provider)
        return await self._in_windows(data)

    async def _as_it_came(self, data: bytes) -> Transcript:
        """Without PyAV: the file as it came, in one request, when the endpoint takes its format."""
        upload_name = _sniffed(data)
        if upload_name is None or len(data) > self.max_upload_bytes:
            why = "in a format the endpoint does not take" if upload_name is None else "too large for one request"
            raise MediaError(str(extras.MissingExtra("voice", "av", f"transcribing audio {why}")))
        body = await self._post(data, upload_name)
        said, duration = str(body.get("text", "")).strip(), float(body.get("duration") or 0.0)
        return Transcript(said, _language(body) or self.language, duration, self.provider)

    async def _in_windows(self, data: bytes) -> Transcript:
        decoded = await asyncio.to_thread(decode, data, max_duration_s=self.max_duration_s)
        samples = decoded.samples
        cut = await asyncio.to_thread(split_at_silences, samples, max_window_s=self.window_s)  # numpy over minutes
        windows = [w for w in cut if not w.silent]
        texts: list[str] = []
        language: str | None = None
        for window in windows:  # one after the other: a rate-limited key gains nothing from parallel uploads
            wav = await asyncio.to_thread(wav_bytes, samples[window.start : window.end])
            body = await self._post(wav, "audio.wav")
            texts.append(str(body.get("text", "")))
            language = language or _language(body)
        language = language or self.language
        return Transcript(join_texts(texts), language, decoded.duration_s, self.provider, windows=max(1, len(windows)))

    async def _post(self, data: bytes, upload_name: str) -> dict[str, Any]:
        try:
            async for attempt in http_retrying(self._attempts, self._max_wait):
                with attempt:
                    response = await self._client.post(
                        "/audio/transcriptions", files=self._files(data, upload_name), data=self._fields()
                    )
                    if response.status_code == 400 and self._format != "json" and "format" in response.text:
                        self._format = "json"  # gpt-4o-transcribe and some local servers: no verbose_json
                        response = await self._client.post(
                            "/audio/transcriptions", files=self._files(data, upload_name), data=self._fields()
                        )
                    self._raise_for_status(response)
        except httpx.HTTPStatusError as exc:
            raise self._one_line(exc.response) from None
        except RetryLater as exc:
            raise MediaError(f"transcription at {self._where()} is rate-limited: {exc}") from None
        except httpx.TransportError as exc:
            raise MediaError(f"transcription at {self._where()} unreachable ({reason(exc, 160)})") from None
        try:
            body = response.json()
        except ValueError:
            return {"text": response.text}  # response_format=text, from a server that ignored ours
        if not isinstance(body, dict) or "text" not in body:
            raise MediaError(f"transcription at {self._where()} answered without a text field")
        return body

    def _files(self, data: bytes, upload_name: str) -> dict[str, tuple[str, bytes, str]]:
        return {"file": (upload_name, data, _MIME.get(Path(upload_name).suffix, "application/octet-stream"))}

    def _fields(self) -> dict[str, str]:
        fields = {"model": self.model, "response_format": self._format}
        if self.language:
            fields["language"] = self.language
        return fields

    def _raise_for_status(self, response: httpx.Response) -> None:
        if response.status_code == 429 or response.status_code >= 500:
            after = retry_after(response)
            # A server that said when to come back, later than we wait, is not hammered in the meantime.
            if after is not None and after > self._max_wait:
                raise RetryLater(f"HTTP {response.status_code}, retry after {after:.0f} s")
        response.raise_for_status()  # 429/5xx go back to the retry loop; other 4xx end it

    def _one_line(self, response: httpx.Response) -> MediaError:
        status, where = response.status_code, self._where()
        if status in (401, 403):
            return MediaError(f"transcription at {where} refused the key (HTTP {status}): check the API key")
        if status == 404:
            return MediaError(f"transcription at {where}: model {self.model!r} or endpoint not found (HTTP 404)")
        if status == 413:
            return MediaError(f"transcription at {where}: audio too large for the endpoint (HTTP 413)")
        if status == 429:
            return MediaError(f"transcription at {where} is rate-limited (HTTP 429, {self._attempts} tries)")
        detail = _error_message(response)
        suffix = f" after {self._attempts} tries" if status >= 500 else ""
        return MediaError(f"transcription at {where} failed: HTTP {status}{suffix}{detail}")

    def _where(self) -> str:
        return urlsplit(self.base_url).netloc or self.base_url

    async def aclose(self) -> None:
        await self._client.aclose()


def _read(path: str | os.PathLike[str]) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise MediaError(f"audio file unreadable: {Path(path).name} ({exc.strerror or exc})") from None


def _sniffed(data: bytes) -> str | None:
    """The upload name of ``data`` by its first bytes (PyAV's probe, when there is no PyAV); None: unknown."""
    head = data[:12]
    if head.startswith(b"OggS"):
        return "audio.ogg"
    if head.startswith(b"ID3") or head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio.mp3"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio.wav"
    if head.startswith(b"fLaC"):
        return "audio.flac"
    if head.startswith(b"\x1a\x45\xdf\xa3"):  # Matroska / WebM
        return "audio.webm"
    if head[4:8] == b"ftyp":  # MP4 / M4A: what a video note is
        return "audio.mp4"
    return None


def _language(body: dict[str, Any]) -> str | None:
    raw = body.get("language")
    if not isinstance(raw, str) or not raw.strip():
        return None
    name = raw.strip().lower()
    return _LANGUAGE_CODES.get(name, name)


def _error_message(response: httpx.Response) -> str:
    try:
        message = response.json().get("error", {}).get("message")
    except (ValueError, AttributeError):
        message = response.text
    message = " ".join(str(message or "").split())[:200]
    return f" ({message})" if message else ""


# The transcription model each preset serves when none is configured.
DEFAULT_MODELS = {"openai": "whisper-1", "groq": "whisper-large-v3-turbo"}


def from_settings(
    *,
    preset_name: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> HttpTranscriber:
    """An HttpTranscriber from config values: a preset of ``teleton.config.presets`` (``openai``, ``groq``) or a
    base URL; the key from ``api_key`` or the preset's variable. ``TranscriberConfigError`` names the fix."""
    example = "e.g. http://127.0.0.1:8000/v1 for openai_compatible, or name a preset: openai, groq"
    try:
        base_url, key, found = service_endpoint(
            "media.transcription", name=preset_name, base_url=base_url, api_key=api_key, example=example, env=env
        )
    except PresetError as exc:
        raise TranscriberConfigError(str(exc)) from None
    label = found.name if found else None
    model = model or DEFAULT_MODELS.get(preset_name or "")
    if not model:
        raise TranscriberConfigError("media.transcription.model: required (e.g. whisper-1, whisper-large-v3-turbo)")
    return HttpTranscriber(model, base_url=base_url, api_key=key, label=label, **options)


class TranscriberConfigError(ValueError):
    """A transcription setting that cannot work, worded as one line naming the fix."""
