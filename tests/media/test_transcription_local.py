"""The real local Whisper model (the packaged whisper-base, CTranslate2 on CPU) on committed voice notes."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from teleton.media.audio import SAMPLE_RATE, decode, wav_bytes
from teleton.media.errors import MediaError
from teleton.media.transcribe_local import LocalSettings, LocalTranscriber, from_settings
from teleton.media.transcription import Transcriber
from teleton.media.whisper_files import WhisperFiles, directory_whisper, packaged_whisper
from teleton.providers.pinned_files import ModelFilesError
from tests.conftest import requires_extra
from tests.media.test_transcription_audio import DENTIST, MEETING_ES, RECEIPT, encode_as, long_recording

pytestmark = requires_extra("voice")


@pytest.fixture(scope="module")
def whisper() -> Iterator[LocalTranscriber]:
    transcriber = from_settings()  # the default: packaged whisper-base, language detected
    transcriber.load_sync()
    yield transcriber
    transcriber.close()


def words(text: str) -> str:
    return " ".join(text.lower().replace(",", " ").replace(".", " ").split())


async def test_a_voice_note_is_transcribed_with_its_words_and_language(whisper: LocalTranscriber) -> None:
    assert isinstance(whisper, Transcriber)

    transcript = await whisper.transcribe(RECEIPT.read_bytes(), filename="voice.oga")

    assert "the receipt from the hardware store is in the blue folder" in words(transcript.text)
    assert transcript.language == "en"
    assert transcript.duration_s == pytest.approx(3.44, abs=0.05)
    assert transcript.provider == "local:whisper-base"


async def test_another_language_is_detected_and_written_in_it(whisper: LocalTranscriber) -> None:
    transcript = await whisper.transcribe(MEETING_ES)  # a path works as well as bytes

    assert transcript.language == "es"
    assert {"reunión", "martes"} <= set(words(transcript.text).split())


async def test_a_round_video_note_is_transcribed_from_its_sound(whisper: LocalTranscriber) -> None:
    video_note = encode_as(decode(DENTIST).samples, "mp4", "aac", video=True)

    transcript = await whisper.transcribe(video_note, filename="video_note.mp4")

    assert {"dentist", "thursday", "tooth"} <= set(words(transcript.text).split())


async def test_a_long_recording_is_transcribed_window_by_window_without_blocking(whisper: LocalTranscriber) -> None:
    samples, _sentences = long_recording()  # receipt ... 26 s silence ... dentist ... 26 s silence ... receipt
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    running = asyncio.create_task(ticker())
    try:
        transcript = await whisper.transcribe(wav_bytes(samples))
    finally:
        running.cancel()

    text = words(transcript.text)
    assert text.count("receipt") == 2 and "dentist" in text
    assert text.index("receipt") < text.index("dentist") < text.rindex("receipt")
    assert "thank you" not in text  # the silences were not sent to Whisper to hallucinate on
    assert transcript.windows == 3
    assert transcript.duration_s == pytest.approx(len(samples) / SAMPLE_RATE)
    assert ticks > 3  # the event loop kept running while Whisper worked on its own thread


async def test_bad_files_and_long_audio_are_refused_in_one_line(whisper: LocalTranscriber) -> None:
    with pytest.raises(MediaError) as corrupt:
        await whisper.transcribe(b"OggS" + b"\x00garbage" * 300)
    strict = LocalTranscriber(whisper.files, LocalSettings(max_duration_s=2))
    with pytest.raises(MediaError) as too_long:
        await strict.transcribe(RECEIPT)
    await strict.aclose()

    assert str(corrupt.value).startswith("corrupt or unreadable audio") and "\n" not in str(corrupt.value)
    assert str(too_long.value) == "audio is 3 s long, over the 2 s limit for transcription"


async def test_a_configured_model_directory_is_used_as_it_is(tmp_path: Path) -> None:
    with packaged_whisper().directory() as joined:
        model_dir = Path(shutil.copytree(joined, tmp_path / "my-whisper"))

    try:
        transcriber = from_settings(model_path=str(model_dir), settings=LocalSettings(language="en"))
        transcript = await transcriber.transcribe(RECEIPT)
        await transcriber.aclose()
    finally:
        shutil.rmtree(model_dir)  # 145 MB: not left behind in pytest's kept temporary directories

    assert transcriber.provider == "local:my-whisper"
    assert "blue folder" in words(transcript.text)


async def test_a_tampered_model_file_is_refused_before_it_is_loaded(tmp_path: Path) -> None:
    names = ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")
    for name in names:
        (tmp_path / name).write_text("{}")
    files = WhisperFiles("whisper-base", {n: (tmp_path / n,) for n in names}, {"model.bin": "0" * 64})
    transcriber = LocalTranscriber(files)

    with pytest.raises(ModelFilesError, match="sha256"):
        await transcriber.load()
    with pytest.raises(MediaError) as caught:
        await transcriber.transcribe(RECEIPT)
    await transcriber.aclose()

    assert str(caught.value).startswith("local transcription unavailable: speech model file")
    assert "refusing to load it" in str(caught.value) and "\n" not in str(caught.value)


def test_a_model_directory_without_its_tokenizer_is_refused_at_start(tmp_path: Path) -> None:
    # faster-whisper would fetch a missing tokenizer.json from the Hugging Face hub: refuse instead.
    for name in ("model.bin", "config.json", "vocabulary.txt"):
        (tmp_path / name).write_text("{}")

    with pytest.raises(ModelFilesError, match=r"tokenizer\.json"):
        LocalTranscriber(directory_whisper(tmp_path))
