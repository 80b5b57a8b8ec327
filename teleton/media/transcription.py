"""Speech to text: what every transcriber returns and promises, and how long audio is cut into windows.

Three kinds of transcriber sit behind :class:`Transcriber`: the local Whisper model
(``transcribe_local.py``), an OpenAI-compatible ``/audio/transcriptions`` endpoint (``transcribe_http.py``)
and, wired by the Telegram layer, Telegram's own ``TranscribeAudio``. Whatever goes wrong with the file or
the provider reaches the caller as a :class:`MediaError` whose text is one line for the model and the log.

Whisper reads at most 30 s at a time, and an HTTP endpoint takes a limited upload: longer audio is cut into
windows, each cut placed in the quietest stretch near the window's end so that no word is split in two.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from teleton.media.audio import SAMPLE_RATE

DEFAULT_MAX_DURATION_S = 30 * 60.0  # a half-hour voice note is already rare; a 3-hour podcast is not a message
WHISPER_WINDOW_S = 30.0
# Where a cut may go: the last SEARCH_S seconds of a window. Pauses between sentences come every few seconds.
SEARCH_S = 8.0
FRAME_S = 0.02
PAUSE_S = 0.3  # energy is averaged over this long, so a cut finds a pause, not the closure of a "t"
# Below this RMS (about -50 dBFS) a window holds no speech: Whisper fed pure silence invents "Thank you."
SILENCE_RMS = 0.003


@dataclass(frozen=True)
class Transcript:
    text: str  # "" when the audio held no speech
    language: str | None  # ISO 639-1 ("en", "ru", "fa"); None when the provider does not say
    duration_s: float  # of the audio, not of the work
    provider: str  # "local:whisper-base", "groq:whisper-large-v3-turbo", ...: shown in logs and /status
    language_probability: float | None = None
    windows: int = 1  # how many pieces the audio was transcribed in


@runtime_checkable
class Transcriber(Protocol):
    """Anything that turns an audio file into a :class:`Transcript` without blocking the event loop."""

    name: str

    async def transcribe(self, audio: bytes | str | os.PathLike[str], *, filename: str | None = None) -> Transcript:
        """Transcribe ``audio`` (the file's bytes, or its path); ``filename`` hints at the format.

        Raises :class:`teleton.media.errors.MediaError` (one line) for a corrupt or unsupported file, audio
        longer than the transcriber's ``max_duration_s``, or a provider that failed.
        """
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Window:
    start: int  # sample offsets into the decoded audio, end exclusive
    end: int
    silent: bool  # nothing above SILENCE_RMS: not worth sending to a model

    @property
    def duration_s(self) -> float:
        return (self.end - self.start) / SAMPLE_RATE


def split_at_silences(
    samples: np.ndarray, *, max_window_s: float = WHISPER_WINDOW_S, search_s: float = SEARCH_S
) -> list[Window]:
    """Cut ``samples`` (16 kHz mono) into contiguous windows of at most ``max_window_s``.

    Each cut goes to the quietest ``PAUSE_S`` stretch within the last ``search_s`` seconds of its window (so a
    sentence is not split mid-word unless someone talks for ``search_s`` seconds without a breath).
    """
    n = len(samples)
    if n == 0:
        return []
    max_len = max(1, int(max_window_s * SAMPLE_RATE))
    frame = max(1, int(FRAME_S * SAMPLE_RATE))
    energy = _smoothed_energy(samples, frame, max(1, round(PAUSE_S / FRAME_S)))
    search = min(max_len - frame, max(frame, int(search_s * SAMPLE_RATE)))
    windows: list[Window] = []
    start = 0
    while n - start > max_len:
        lo, hi = (start + max_len - search) // frame, (start + max_len) // frame
        # Ties go to the latest quiet frame: the longest window, so fewer windows in all.
        region = energy[lo:hi]
        best = lo + (len(region) - 1 - int(np.argmin(region[::-1])))
        cut = min(max(best * frame, start + frame), start + max_len)
        windows.append(_window(energy, frame, start, cut))
        start = cut
    windows.append(_window(energy, frame, start, n))
    return windows


def join_texts(parts: list[str]) -> str:
    """The windows' texts as one transcript (each window's text is trimmed; empty ones disappear)."""
    return " ".join(part.strip() for part in parts if part and part.strip())


def _window(energy: np.ndarray, frame: int, start: int, end: int) -> Window:
    # Silent means no PAUSE_S stretch reaches speech level: a window's mean would call a quiet word in
    # 29 s of silence silence too.
    stretch = energy[start // frame : max(start // frame + 1, -(-end // frame))]
    loudest = float(np.sqrt(stretch.max())) if stretch.size else 0.0
    return Window(start, end, loudest < SILENCE_RMS)


def _smoothed_energy(samples: np.ndarray, frame: int, width: int) -> np.ndarray:
    """Mean power per ``frame`` samples (the last, partial frame too), averaged over ``width`` frames."""
    whole = len(samples) // frame
    power = np.mean(np.square(samples[: whole * frame].reshape(whole, frame), dtype=np.float32), axis=1)
    if len(samples) > whole * frame:
        power = np.append(power, np.mean(np.square(samples[whole * frame :], dtype=np.float32)))
    if width <= 1 or len(power) < width:
        return power.astype(np.float32)
    kernel = np.ones(width, dtype=np.float32) / width
    return np.convolve(power, kernel, mode="same").astype(np.float32)
