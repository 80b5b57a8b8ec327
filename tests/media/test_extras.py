"""A default install (no extras): every configured part whose extra is missing is one line naming
``pip install 'teleton[...]'``, never an ImportError; voice notes still go to an HTTP endpoint as they came.

The packages are made absent at the import system's edge (``without_extra``: ``sys.modules[name] = None``,
so importing raises ModuleNotFoundError and ``find_spec`` finds nothing), whatever this venv has installed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from teleton.cli.errors import explain
from teleton.config.schema import EmbeddingConfig, SpeechConfig
from teleton.media.audio import decode, probe
from teleton.media.errors import MediaError
from teleton.media.speech import speech_client
from teleton.media.speech_local import LocalSpeech
from teleton.media.transcribe_http import HttpTranscriber
from teleton.media.transcribe_local import from_settings
from teleton.memory.embeddings import create_provider
from teleton.memory.embeddings.packaged import packaged_model
from teleton.providers.extras import MissingExtra, install_command
from teleton.providers.pinned_files import ModelFilesError
from tests.conftest import without_extra
from tests.fakes.openai_audio import FakeTranscriptions

RECEIPT = Path(__file__).resolve().parents[1] / "fixtures" / "media" / "voice_en_receipt.ogg"
VOICE = install_command("voice")
INSTALL = f"install it with: {VOICE}"


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_without_the_voice_extra_local_transcription_and_voice_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    without_extra(monkeypatch, "voice")
    with pytest.raises(MissingExtra) as stt:
        from_settings()  # the packaged whisper-base
    assert one_line(stt.value).startswith("local transcription needs the voice extra (")
    assert one_line(stt.value).endswith(f"is not installed): install it with: {VOICE}")
    with pytest.raises(MissingExtra) as tts:
        LocalSpeech()
    assert one_line(tts.value).startswith("the local voice needs the voice extra (") and VOICE in str(tts.value)
    with pytest.raises(MissingExtra):  # not a "key to fix" ValueError: the caller names the extra
        speech_client(SpeechConfig())
    for read in (probe, decode):
        with pytest.raises(MediaError) as audio:
            read(RECEIPT.read_bytes())
        assert (
            one_line(audio.value)
            == f"decoding audio needs the voice extra (av is not installed): install it with: {VOICE}"
        )


def test_a_configured_model_directory_still_needs_faster_whisper(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.setitem(sys.modules, "faster_whisper", None)
    hint = re.escape(f"faster_whisper is not installed): install it with: {install_command('voice')}")
    with pytest.raises(MissingExtra, match=hint):
        from_settings(model_path=str(tmp_path))


@pytest.mark.parametrize(("model", "extra"), [("all-MiniLM-L6-v2", "minilm"), ("use-multilingual", "use-multilingual")])
def test_an_embedding_model_without_its_extra_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, model: str, extra: str
) -> None:
    without_extra(monkeypatch, extra)
    with pytest.raises(MissingExtra) as exc:
        packaged_model(model)
    with pytest.raises(ModelFilesError):  # what the daemon's start and the memory commands catch
        create_provider(EmbeddingConfig(model=model))
    line = one_line(exc.value)
    assert line.endswith(f"install it with: {install_command(extra)}") and "embedding model" in line
    assert explain(exc.value) == line  # what `teleton start` prints, as it is


async def test_without_pyav_a_voice_note_goes_to_the_endpoint_as_it_came(monkeypatch: pytest.MonkeyPatch) -> None:
    without_extra(monkeypatch, "voice")
    with FakeTranscriptions() as server:
        server.texts = ["The receipt is in the blue folder."]
        transcriber = HttpTranscriber("whisper-1", base_url=server.base_url, max_wait=0.05)
        try:
            transcript = await transcriber.transcribe(RECEIPT.read_bytes(), filename="voice.oga")
            with pytest.raises(MediaError) as unknown:
                await transcriber.transcribe(b"\x00\x01not audio" * 100)
        finally:
            await transcriber.aclose()
    assert transcript.text == "The receipt is in the blue folder." and transcript.language == "en"
    [upload] = server.requests
    assert (upload.filename, upload.data) == ("audio.ogg", RECEIPT.read_bytes())  # the Opus file itself
    assert one_line(unknown.value) == (
        f"transcribing audio in a format the endpoint does not take needs the voice extra (av is not installed): "
        f"install it with: {VOICE}"
    )


def test_a_hugging_face_model_without_the_hf_extra_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model directory (or a downloaded Hugging Face id) is tokenised by `tokenizers`, which only the hf extra
    (or minilm) brings."""
    (tmp_path / "model.onnx").write_bytes(b"not read before the tokenizer")
    (tmp_path / "tokenizer.json").write_text("{}")
    without_extra(monkeypatch, "hf")
    with pytest.raises(MissingExtra) as err:
        create_provider(EmbeddingConfig(model_path=tmp_path))
    assert one_line(err.value).endswith(f"install it with: {install_command('hf')}")
    assert explain(err.value) is not None and install_command("hf") in str(explain(err.value))
