"""The ``local`` transcriber: Whisper on this machine's CPU, offline (CTranslate2 through faster-whisper).

The model loads on first use, not at start: most daemons go days without a voice note, and Whisper base
holds about 230 MB while loaded. Loading, decoding and inference all run on one dedicated worker thread
(the embedder's pattern, ``teleton/memory/embeddings/local.py``), so the event loop never waits and two
voice notes arriving together are transcribed one after the other instead of fighting over two cores.

Audio is decoded to 16 kHz mono, cut at pauses into windows of at most 30 s (what Whisper reads at once),
and the silent windows skipped (Whisper fed silence invents "Thank you."). The language is detected on the
first window that has speech, then kept for the rest, so one voice note is not transcribed half in Russian,
half in Ukrainian; ``language`` in the config skips detection altogether.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from teleton.media.audio import SAMPLE_RATE, AudioSource, decode
from teleton.media.errors import MediaError
from teleton.media.transcription import (
    DEFAULT_MAX_DURATION_S,
    WHISPER_WINDOW_S,
    Transcript,
    join_texts,
    split_at_silences,
)
from teleton.media.whisper_files import WhisperFiles, whisper_files
from teleton.process.threads import cores
from teleton.providers import extras
from teleton.providers.pinned_files import ModelFilesError
from teleton.text.lines import reason


@dataclass(frozen=True)
class LocalSettings:
    # CTranslate2 quantises the float16 weights at load; on this 2-core machine int8 ran 1.5x float32's speed
    # with no more errors (scripts/bench_transcribe.py --compute-type float32).
    compute_type: str = "int8"
    # 5 beams: Whisper's encoder pass over a whole 30 s window is most of the cost of a voice note, so beams
    # add little time, and they cut English WER from 9.8% to 6.5% on scripts/bench_transcribe.py's clips.
    beam_size: int = 5
    language: str | None = None  # ISO 639-1 to skip detection, e.g. "ru"
    threads: int | None = None  # default: every core
    max_duration_s: float = DEFAULT_MAX_DURATION_S
    # Where the split packaged model is joined while it loads (the data directory suits: /tmp may be RAM).
    scratch_dir: Path | None = None


class LocalTranscriber:
    """A :class:`teleton.media.transcription.Transcriber` over a local Whisper model."""

    name = "local"

    def __init__(self, files: WhisperFiles, settings: LocalSettings | None = None) -> None:
        # A missing package fails at start (one line naming the voice extra), not at the first voice note.
        extras.require("voice", "local transcription", "faster_whisper", "av")
        files.check_present()
        self.files = files
        self.settings = settings or LocalSettings()
        self.provider = f"local:{files.model_id}"
        self.load_seconds: float | None = None
        self._model: Any = None
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teleton-stt")

    async def load(self) -> None:
        """Load the model now (``teleton doctor``, or a daemon that expects voice notes); ModelFilesError."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.load_sync)

    async def transcribe(
        self, audio: AudioSource, *, filename: str | None = None, language: str | None = None
    ) -> Transcript:
        """See :class:`Transcriber`; ``language`` (ISO 639-1) skips detection for this file."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.transcribe_sync, audio, language)

    def transcribe_sync(self, audio: AudioSource, language: str | None = None) -> Transcript:
        """Synchronous transcription (for scripts and the worker thread)."""
        decoded = decode(audio, max_duration_s=self.settings.max_duration_s)
        try:
            model = self.load_sync()
        except ModelFilesError as exc:
            raise MediaError(f"local transcription unavailable: {exc}") from None
        return self.transcribe_samples(decoded.samples, model, language)

    def transcribe_samples(self, samples: np.ndarray, model: Any = None, language: str | None = None) -> Transcript:
        model = model or self.load_sync()
        windows = split_at_silences(samples, max_window_s=WHISPER_WINDOW_S)
        language, probability = language or self.settings.language, None
        texts: list[str] = []
        spoken = 0
        for window in windows:
            if window.silent:
                continue
            spoken += 1
            chunk = samples[window.start : window.end]
            if language is None:
                language, probability = _detect_language(model, chunk)
            texts.append(self._run(model, chunk, language))
        duration = len(samples) / SAMPLE_RATE
        return Transcript(join_texts(texts), language, duration, self.provider, probability, max(1, spoken))

    def unload(self) -> None:
        """Drop the model (about 230 MB for whisper-base); the next voice note loads it again."""
        with self._lock:
            self._model = None

    def load_sync(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._load()
            return self._model

    def _load(self) -> Any:
        # faster-whisper logs every call at INFO ("Processing audio with duration ..."): noise in the daemon's log.
        logging.getLogger("faster_whisper").setLevel(logging.WARNING)
        started = time.perf_counter()
        with self.files.directory(self.settings.scratch_dir) as folder:
            try:
                model = _model_class()(
                    str(folder),
                    device="cpu",
                    compute_type=self.settings.compute_type,
                    cpu_threads=self.settings.threads or cores(),
                    local_files_only=True,
                )
            except Exception as exc:  # a truncated or foreign model.bin in a configured directory
                raise ModelFilesError(f"{folder} is not a loadable Whisper model ({reason(exc, 200)})") from None
        self.load_seconds = time.perf_counter() - started
        return model

    def _run(self, model: Any, chunk: np.ndarray, language: str | None) -> str:
        segments, _info = model.transcribe(
            chunk,
            language=language,
            beam_size=self.settings.beam_size,
            # Each window is transcribed on its own: feeding the previous text back is what lets one
            # hallucination repeat through a whole recording.
            condition_on_previous_text=False,
            without_timestamps=True,
            vad_filter=False,  # windows are already cut at pauses and silent ones skipped
        )
        return join_texts([segment.text for segment in segments])

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        self._executor.shutdown(wait=False)


def _detect_language(model: Any, chunk: np.ndarray) -> tuple[str, float]:
    """The most likely language of ``chunk`` (at most 30 s), from the encoder pass transcription reuses."""
    if not model.model.is_multilingual:
        return "en", 1.0
    from faster_whisper.audio import pad_or_trim  # deferred: faster-whisper is the optional [voice] extra

    # Exactly the frames faster-whisper's own first segment encodes (it drops the last feature frame), so
    # the encoder output cached below serves both detection and transcription.
    features = model.feature_extractor(chunk)
    frames = min(model.feature_extractor.nb_max_frames, features.shape[-1] - 1)
    encoded = model.encode(pad_or_trim(features[:, :frames]))
    token, probability = model.model.detect_language(encoded)[0][0]
    return token[2:-2], float(probability)


_MODEL_CLASS: Any = None


def _model_class() -> Any:
    """faster-whisper's WhisperModel, remembering its last encoder output.

    Detecting the language and transcribing each run Whisper's encoder over the same 30 s: on two cores that
    pass is most of the cost of a short voice note, so the second one is served from here (keyed by the
    features' bytes: any other input is encoded as usual).
    """
    global _MODEL_CLASS
    if _MODEL_CLASS is None:
        from faster_whisper import WhisperModel  # deferred: faster-whisper is the optional [voice] extra

        class OneEncodeWhisper(WhisperModel):
            _last: tuple[tuple[tuple[int, ...], bytes], Any] | None = None

            def encode(self, features: np.ndarray) -> Any:
                data = np.ascontiguousarray(features, dtype=np.float32)
                key = (data.shape, hashlib.blake2b(data.tobytes(), digest_size=16).digest())
                if self._last is not None and self._last[0] == key:
                    return self._last[1]
                output = super().encode(features)
                self._last = (key, output)
                return output

        _MODEL_CLASS = OneEncodeWhisper
    return _MODEL_CLASS


def from_settings(
    model: str | None = None, model_path: str | None = None, settings: LocalSettings | None = None
) -> LocalTranscriber:
    """The configured local transcriber (the packaged ``whisper-base`` unless told otherwise)."""
    return LocalTranscriber(whisper_files(model, model_path), settings)
