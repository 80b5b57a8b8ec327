"""The OpenAI-compatible transcriber against a scripted ``/v1/audio/transcriptions`` on 127.0.0.1: what it
uploads, what it makes of the answer, and how busy, broken or unreachable servers end."""

from __future__ import annotations

import io
import socket
import wave
from collections.abc import Iterator
from typing import Any

import pytest

from teleton.media.audio import SAMPLE_RATE, decode, wav_bytes
from teleton.media.errors import MediaError
from teleton.media.transcribe_http import HttpTranscriber, TranscriberConfigError, from_settings
from teleton.media.transcription import Transcriber
from tests.conftest import requires_extra
from tests.fakes.openai_audio import FakeTranscriptions
from tests.media.test_transcription_audio import RECEIPT, long_recording


@pytest.fixture
def server() -> Iterator[FakeTranscriptions]:
    with FakeTranscriptions(key="sk-test") as fake:
        yield fake


def client(server: FakeTranscriptions, **options: Any) -> HttpTranscriber:
    options = {"max_wait": 0.05, **options}  # retry back-off short enough for a test
    return HttpTranscriber("whisper-1", base_url=server.base_url, api_key="sk-test", **options)


async def test_a_voice_note_is_uploaded_as_it_is_and_the_answer_becomes_a_transcript(
    server: FakeTranscriptions,
) -> None:
    server.texts = ["The receipt from the hardware store is in the blue folder."]
    transcriber = client(server)
    assert isinstance(transcriber, Transcriber)

    transcript = await transcriber.transcribe(RECEIPT.read_bytes(), filename="voice.oga")
    await transcriber.aclose()

    assert transcript.text == "The receipt from the hardware store is in the blue folder."
    assert transcript.language == "en"  # verbose_json says "english"
    assert transcript.duration_s == 3.5
    assert transcript.provider.endswith(":whisper-1")
    [upload] = server.requests
    assert upload.data == RECEIPT.read_bytes()  # the Opus file itself, not a re-encoding
    assert upload.filename == "audio.ogg"  # OpenAI accepts .ogg, not Telegram's .oga
    assert upload.fields == {"model": "whisper-1", "response_format": "verbose_json"}


async def test_a_rate_limit_is_waited_out_then_the_transcript_arrives(server: FakeTranscriptions) -> None:
    server.failures = [(429, "0"), (503, None)]
    server.texts = ["hello"]
    transcriber = client(server)

    transcript = await transcriber.transcribe(RECEIPT)
    await transcriber.aclose()

    assert transcript.text == "hello"
    assert len(server.requests) == 3


async def test_a_server_that_says_come_back_in_an_hour_is_not_hammered(server: FakeTranscriptions) -> None:
    server.failures = [(429, "3600")]
    transcriber = client(server, max_wait=20.0)

    with pytest.raises(MediaError) as caught:
        await transcriber.transcribe(RECEIPT)
    await transcriber.aclose()

    assert len(server.requests) == 1
    assert str(caught.value).endswith("is rate-limited: HTTP 429, retry after 3600 s")


async def test_a_rate_limit_that_never_ends_gives_up_after_the_tries(server: FakeTranscriptions) -> None:
    server.failures = [(429, "0")] * 10
    transcriber = client(server, attempts=3)

    with pytest.raises(MediaError) as caught:
        await transcriber.transcribe(RECEIPT)
    await transcriber.aclose()

    assert len(server.requests) == 3
    assert "is rate-limited (HTTP 429, 3 tries)" in str(caught.value)


async def test_a_wrong_key_is_one_line_and_not_retried(server: FakeTranscriptions) -> None:
    transcriber = HttpTranscriber("whisper-1", base_url=server.base_url, api_key="sk-wrong", max_wait=0.05)

    with pytest.raises(MediaError) as caught:
        await transcriber.transcribe(RECEIPT)
    await transcriber.aclose()

    host = server.base_url.split("//")[1].split("/")[0]
    assert str(caught.value) == f"transcription at {host} refused the key (HTTP 401): check the API key"
    assert server.calls == 1  # no retry: another try would not make the key right


async def test_an_unreachable_server_is_one_line_after_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free, and nobody listens once it is closed
    transcriber = HttpTranscriber("whisper-1", base_url=f"http://127.0.0.1:{port}/v1", attempts=2, max_wait=0.05)

    with pytest.raises(MediaError) as caught:
        await transcriber.transcribe(RECEIPT)
    await transcriber.aclose()

    assert str(caught.value).startswith(f"transcription at 127.0.0.1:{port} unreachable (")
    assert "\n" not in str(caught.value)


@requires_extra("voice")  # the duration then comes from PyAV's probe of the file
async def test_a_model_without_verbose_json_is_asked_for_plain_json(server: FakeTranscriptions) -> None:
    server.verbose = False
    server.texts = ["hello there"]
    transcriber = client(server)

    transcript = await transcriber.transcribe(RECEIPT)
    await transcriber.aclose()

    assert (transcript.text, transcript.language) == ("hello there", None)
    assert transcript.duration_s == pytest.approx(3.44, abs=0.05)  # from the file, as the server did not say
    assert [r.fields["response_format"] for r in server.requests] == ["verbose_json", "json"]


@requires_extra("voice")  # cutting into windows decodes (PyAV)
async def test_long_audio_goes_up_in_windows_cut_at_pauses_and_comes_back_joined(server: FakeTranscriptions) -> None:
    samples, _ = long_recording()  # ~70 s: receipt, silence, dentist, silence, receipt
    server.texts = ["first part.", "second part.", "third part."]
    transcriber = client(server, window_s=30.0)

    transcript = await transcriber.transcribe(wav_bytes(samples))
    await transcriber.aclose()

    assert transcript.text == "first part. second part. third part."
    assert transcript.windows == 3 and len(server.requests) == 3
    for upload in server.requests:
        with wave.open(io.BytesIO(upload.data)) as part:
            assert (part.getframerate(), part.getnchannels()) == (SAMPLE_RATE, 1)
            assert part.getnframes() <= 30 * SAMPLE_RATE
    assert transcript.duration_s == pytest.approx(len(samples) / SAMPLE_RATE)


@requires_extra("voice")  # the probe before the upload is PyAV's
async def test_corrupt_or_too_long_audio_is_refused_before_any_upload(server: FakeTranscriptions) -> None:
    transcriber = client(server, max_duration_s=2)

    with pytest.raises(MediaError) as corrupt:
        await transcriber.transcribe(b"\x00\x01garbage" * 400)
    with pytest.raises(MediaError) as too_long:
        await transcriber.transcribe(RECEIPT)
    await transcriber.aclose()

    assert str(corrupt.value).startswith("corrupt or unreadable audio")
    assert str(too_long.value) == "audio is 3 s long, over the 2 s limit for transcription"
    assert server.requests == []


def test_presets_give_the_endpoint_the_model_and_the_key_variable() -> None:
    groq = from_settings(preset_name="groq", env={"GROQ_API_KEY": "gsk-1"})
    assert (groq.base_url, groq.model, groq.provider) == (
        "https://api.groq.com/openai/v1",
        "whisper-large-v3-turbo",
        "groq:whisper-large-v3-turbo",
    )
    with pytest.raises(TranscriberConfigError, match="set OPENAI_API_KEY"):
        from_settings(preset_name="openai", env={})
    with pytest.raises(TranscriberConfigError, match="base_url: required"):
        from_settings(model="whisper-1", env={})
    local = from_settings(base_url="http://127.0.0.1:8000/v1/", model="Systran/faster-whisper-small", env={})
    assert local.provider == "127.0.0.1:8000:Systran/faster-whisper-small"


@requires_extra("voice")
def test_decoded_audio_is_what_the_windows_carry() -> None:
    samples = decode(RECEIPT).samples
    with wave.open(io.BytesIO(wav_bytes(samples))) as back:
        assert back.getnframes() == len(samples)
