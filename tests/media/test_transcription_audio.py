"""Audio as Telegram delivers it, decoded for transcription; bad files refused in one line; long audio cut
at pauses. Real PyAV/FFmpeg on committed voice notes and on files the tests encode from them."""

from __future__ import annotations

import io
import itertools
import struct
import wave
from pathlib import Path

import numpy as np
import pytest

from teleton.media.audio import SAMPLE_RATE, decode, probe
from teleton.media.errors import MediaError
from teleton.media.transcription import WHISPER_WINDOW_S, split_at_silences
from tests.conftest import requires_extra

pytestmark = requires_extra("voice")  # PyAV decodes; the module is also imported by the voice tests

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "media"
RECEIPT = FIXTURES / "voice_en_receipt.ogg"  # "The receipt from the hardware store is in the blue folder."
DENTIST = FIXTURES / "voice_en_dentist.ogg"  # "Please call the dentist on Thursday morning about the broken tooth."
MEETING_ES = FIXTURES / "voice_es_meeting.ogg"  # "La reunión con el médico es el martes por la tarde."


def encode_as(samples: np.ndarray, container: str, codec: str, *, video: bool = False, audio: bool = True) -> bytes:
    """``samples`` (16 kHz mono float) re-encoded as another file type, with a small black video if asked."""
    import av  # here, not at the top: without the voice extra the module is skipped, not an import error

    out = io.BytesIO()
    with av.open(out, "w", format=container) as target:
        picture = None
        if video:
            picture = target.add_stream("mpeg4", rate=25)
            picture.width, picture.height, picture.pix_fmt = 64, 64, "yuv420p"
        if audio:
            rate = 44_100 if codec == "libmp3lame" else 48_000
            sound = target.add_stream(codec, rate=rate, layout="mono")
            frame = av.AudioFrame.from_ndarray(
                (np.clip(samples, -1, 1) * 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono"
            )
            frame.sample_rate = SAMPLE_RATE
            resampler = av.AudioResampler(sound.codec_context.format.name, "mono", sound.codec_context.sample_rate)
            for part in [*resampler.resample(frame), *resampler.resample(None), None]:
                for packet in sound.encode(part):
                    target.mux(packet)
        if picture is not None:
            black = np.zeros((64, 64, 3), dtype=np.uint8)
            for _ in range(int(len(samples) / SAMPLE_RATE * 25)):
                for packet in picture.encode(av.VideoFrame.from_ndarray(black, format="rgb24")):
                    target.mux(packet)
            for packet in picture.encode(None):
                target.mux(packet)
    return out.getvalue()


def wav_with_format_tag(tag: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(b"\x00\x01" * SAMPLE_RATE)
    data = bytearray(out.getvalue())
    data[20:22] = struct.pack("<H", tag)  # WAVE_FORMAT tag of the fmt chunk
    return bytes(data)


def one_line(exc: pytest.ExceptionInfo[MediaError]) -> str:
    text = str(exc.value)
    assert text and "\n" not in text and len(text) < 200, text
    return text


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples))))


def test_a_voice_note_is_16k_mono_float_and_its_length_is_known_before_decoding() -> None:
    info = probe(RECEIPT.read_bytes())
    decoded = decode(RECEIPT)

    assert (info.container, info.codec, info.has_video) == ("ogg", "opus", False)
    assert info.duration_s == pytest.approx(3.44, abs=0.05)
    assert decoded.samples.dtype == np.float32 and decoded.samples.ndim == 1
    assert decoded.duration_s == pytest.approx(info.duration_s, abs=0.05)
    assert rms(decoded.samples) > 0.02  # speech, not silence


@pytest.mark.parametrize(
    ("container", "codec", "video", "expected_codec"),
    [
        ("mp3", "libmp3lame", False, "mp3"),  # an audio file
        ("ipod", "aac", False, "aac"),  # .m4a, as iPhones send it
        ("wav", "pcm_s16le", False, "pcm_s16le"),
        ("mp4", "aac", True, "aac"),  # a round video note
    ],
)
def test_other_formats_decode_to_the_same_speech(container: str, codec: str, video: bool, expected_codec: str) -> None:
    original = decode(RECEIPT).samples
    data = encode_as(original, container, codec, video=video)

    info = probe(data)
    decoded = decode(data)

    assert info.codec.startswith(expected_codec) and info.has_video is video
    assert decoded.duration_s == pytest.approx(len(original) / SAMPLE_RATE, abs=0.1)
    assert rms(decoded.samples) == pytest.approx(rms(original), rel=0.15)


def test_corrupt_audio_is_one_line_not_a_crash() -> None:
    voice = RECEIPT.read_bytes()
    for broken in (b"\x00\x01garbage" * 500, voice[:200] + bytes(range(256)) * 20, b"OggS" + b"\xff" * 64):
        with pytest.raises(MediaError) as caught:
            decode(broken)
        assert "corrupt or unreadable audio" in one_line(caught)


def test_an_empty_file_is_refused() -> None:
    with pytest.raises(MediaError) as caught:
        decode(b"")
    assert "empty" in one_line(caught)


def test_an_unsupported_codec_is_named_as_such() -> None:
    with pytest.raises(MediaError) as caught:
        decode(wav_with_format_tag(0x7777))  # a WAV of a codec FFmpeg has no decoder for
    assert "unsupported audio codec" in one_line(caught)


def test_a_video_without_sound_has_nothing_to_transcribe() -> None:
    silent_film = encode_as(np.zeros(SAMPLE_RATE, dtype=np.float32), "mp4", "aac", video=True, audio=False)
    with pytest.raises(MediaError) as caught:
        decode(silent_film)
    assert "a video without sound" in one_line(caught)


def test_audio_over_the_limit_is_refused_with_its_length() -> None:
    with pytest.raises(MediaError) as caught:
        decode(RECEIPT, max_duration_s=2)
    assert one_line(caught) == "audio is 3 s long, over the 2 s limit for transcription"


def test_audio_whose_header_understates_its_length_is_still_stopped_at_the_limit() -> None:
    # Twenty voice notes chained in one Ogg file: a valid file whose header speaks for the first link only.
    chained = RECEIPT.read_bytes() * 20
    assert probe(chained).duration_s == pytest.approx(3.44, abs=0.05)

    with pytest.raises(MediaError) as caught:
        decode(chained, max_duration_s=30)
    assert "over the 30 s limit" in one_line(caught)
    assert decode(chained).duration_s == pytest.approx(20 * 3.44, abs=1)


def long_recording() -> tuple[np.ndarray, list[tuple[int, int]]]:
    """receipt, 26 s of silence, dentist, 26 s of silence, receipt: ~70 s, with where each sentence is."""
    receipt, dentist = decode(RECEIPT).samples, decode(DENTIST).samples
    gap = np.zeros(int(26 * SAMPLE_RATE), dtype=np.float32)
    pieces = [receipt, gap, dentist, gap, receipt]
    spans, offset = [], 0
    for piece in pieces:
        if piece is not gap:
            spans.append((offset, offset + len(piece)))
        offset += len(piece)
    return np.concatenate(pieces), spans


def test_long_audio_is_cut_into_whisper_windows_between_sentences() -> None:
    samples, sentences = long_recording()

    windows = split_at_silences(samples)

    assert windows[0].start == 0 and windows[-1].end == len(samples)
    assert all(a.end == b.start for a, b in itertools.pairwise(windows))
    assert all(w.duration_s <= WHISPER_WINDOW_S for w in windows)
    cuts = [w.end for w in windows[:-1]]
    assert not [cut for cut in cuts for start, end in sentences if start < cut < end], "a sentence was cut"
    spoken = [w for w in windows if not w.silent]
    assert all(any(w.start <= s and e <= w.end for s, e in sentences) for w in spoken)
    assert len(spoken) == len(sentences)  # every sentence lands whole in some window


def test_a_breathless_stretch_is_still_cut_within_the_window() -> None:
    noise = np.random.default_rng(7).uniform(-0.3, 0.3, 75 * SAMPLE_RATE).astype(np.float32)

    windows = split_at_silences(noise)

    assert [w.silent for w in windows] == [False, False, False]
    assert all(w.duration_s <= WHISPER_WINDOW_S for w in windows)
    assert windows[-1].end == len(noise)
