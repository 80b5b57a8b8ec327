"""Audio files to the one shape every transcriber reads: 16 kHz mono float32 samples.

Telegram sends voice notes as OGG/Opus, audio files as MP3 or M4A/AAC, video notes as MP4; people also send
WAV. PyAV decodes them all with the FFmpeg libraries inside its wheel, so no system ffmpeg is needed. A file
FFmpeg cannot read, or a codec it has no decoder for, becomes a :class:`MediaError` with one line, never a
traceback; so does a missing PyAV (it comes with the ``voice`` extra). Everything here is synchronous and
CPU-bound: callers run it on a worker thread.
"""

from __future__ import annotations

import io
import os
import wave
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from teleton.media.errors import MediaError
from teleton.providers import extras
from teleton.text.lines import reason

SAMPLE_RATE = 16_000
AudioSource = bytes | str | os.PathLike[str]
# Resampler output is grouped before it is copied out: one numpy block per ~30 s instead of per 20 ms frame.
_GROUP_SAMPLES = SAMPLE_RATE * 30


@dataclass(frozen=True)
class AudioInfo:
    """What the file's header says, read without decoding the audio."""

    container: str  # FFmpeg's demuxer name: "ogg", "mp3", "mov,mp4,m4a,3gp,3g2,mj2", "wav", ...
    codec: str  # the audio codec: "opus", "mp3", "aac", "pcm_s16le", ...
    duration_s: float | None  # None when the header does not say (some streams only know at the end)
    has_video: bool


@dataclass(frozen=True)
class DecodedAudio:
    samples: np.ndarray  # float32, mono, SAMPLE_RATE
    info: AudioInfo

    @property
    def duration_s(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def probe(source: AudioSource) -> AudioInfo:
    """The container, codec and declared duration of ``source``; MediaError if it is not readable audio."""
    av = _av()
    try:
        with av.open(_open_arg(source), mode="r", metadata_errors="ignore") as container:
            return _info(container)
    except MediaError:
        raise
    except Exception as exc:
        raise _one_line(exc) from None


def decode(source: AudioSource, *, max_duration_s: float | None = None) -> DecodedAudio:
    """``source`` (bytes or a path) as 16 kHz mono float32.

    With ``max_duration_s``, a file whose header declares more is refused before any decoding, and one whose
    header lies (or says nothing) is refused as soon as the decoded audio passes the limit, so a huge file
    never fills memory.
    """
    av = _av()
    try:
        with av.open(_open_arg(source), mode="r", metadata_errors="ignore") as container:
            info = _info(container)
            if max_duration_s is not None and info.duration_s is not None:
                check_duration(info.duration_s, max_duration_s)
            samples = _decode_stream(av, container, max_duration_s)
    except MediaError:
        raise
    except Exception as exc:
        raise _one_line(exc) from None
    if samples.size == 0:
        raise MediaError("the audio track is empty (no sound could be decoded)")
    return DecodedAudio(samples, info)


def check_duration(duration_s: float, max_duration_s: float) -> None:
    if duration_s > max_duration_s:
        raise MediaError(
            f"audio is {_minutes(duration_s)} long, over the {_minutes(max_duration_s)} limit for transcription"
        )


def wav_bytes(samples: np.ndarray, sample_rate: int = SAMPLE_RATE) -> bytes:
    """16-bit PCM WAV of float samples (what an HTTP endpoint is sent when the original cannot be)."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm)
    return buffer.getvalue()


def _decode_stream(av: Any, container: Any, max_duration_s: float | None) -> np.ndarray:
    stream = container.streams.audio[0]
    stream.thread_type = "AUTO"
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    limit = None if max_duration_s is None else int(max_duration_s * SAMPLE_RATE) + SAMPLE_RATE  # 1 s grace
    blocks: list[np.ndarray] = []
    pending: list[np.ndarray] = []
    pending_n = total = 0

    def take(frames: Iterable[Any]) -> None:
        nonlocal pending_n, total
        for frame in frames:
            block = frame.to_ndarray().reshape(-1)
            pending.append(block)
            pending_n += block.size
            total += block.size
        if pending_n >= _GROUP_SAMPLES:
            blocks.append(np.concatenate(pending))
            pending.clear()
            pending_n = 0

    for frame in container.decode(stream):
        take(resampler.resample(frame))
        if limit is not None and total > limit:
            check_duration(total / SAMPLE_RATE, max_duration_s or 0.0)
    take(resampler.resample(None))  # the resampler's delay line still holds the last few milliseconds
    if pending:
        blocks.append(np.concatenate(pending))
    return np.concatenate(blocks).astype(np.float32, copy=False) if blocks else np.zeros(0, dtype=np.float32)


def _info(container: Any) -> AudioInfo:
    has_video = bool(container.streams.video)
    if not container.streams.audio:
        what = "a video without sound" if has_video else "no audio track"
        raise MediaError(f"nothing to transcribe: {what} in this {container.format.name} file")
    stream = container.streams.audio[0]
    if stream.codec_context is None:  # FFmpeg knows the container but has no decoder for what is inside
        raise MediaError(f"unsupported audio codec in this {container.format.name} file (no decoder for it)")
    duration: float | None = None
    if stream.duration is not None and stream.time_base is not None:
        duration = float(stream.duration * stream.time_base)
    elif container.duration is not None:
        duration = container.duration / 1_000_000  # AV_TIME_BASE
    return AudioInfo(container.format.name, stream.codec_context.name, duration, has_video)


def _open_arg(source: AudioSource) -> io.BytesIO | str:
    if isinstance(source, bytes | bytearray | memoryview):
        if not source:
            raise MediaError("the audio file is empty (0 bytes)")
        return io.BytesIO(bytes(source))
    path = Path(source)
    if not path.is_file():
        raise MediaError(f"audio file not found: {path.name}")
    return str(path)


def _one_line(exc: Exception) -> MediaError:
    av = _av()
    if isinstance(exc, av.error.DecoderNotFoundError):
        return MediaError("unsupported audio codec (no decoder for it)")
    if isinstance(exc, av.error.FFmpegError):
        why = (exc.strerror or type(exc).__name__).strip().rstrip(".")
        return MediaError(f"corrupt or unreadable audio file ({why[:1].lower()}{why[1:]})")
    if isinstance(exc, MemoryError):
        return MediaError("audio file too large to decode in memory")
    return MediaError(f"corrupt or unreadable audio file ({reason(exc, 200)})")


def _minutes(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def _av() -> Any:
    """PyAV, imported on first use: the daemon starts (and `teleton doctor` runs) without loading FFmpeg. It
    comes with the voice extra: without it, decoding is one line naming the command."""
    try:
        import av  # deferred: FFmpeg loads only with the first audio file
    except ModuleNotFoundError as exc:
        if exc.name != "av":
            raise
        raise MediaError(str(extras.MissingExtra("voice", "av", "decoding audio"))) from None
    return av
