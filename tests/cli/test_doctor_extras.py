"""`teleton doctor` on a default install (no extras): voice notes not transcribed is a SKIP with the command,
not a failure; a configured part whose extra is missing is a FAIL naming that extra. The real CLI in a
subprocess: tests/foundation/test_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from teleton.providers.extras import install_command
from tests.cli.test_doctor_providers import checks
from tests.conftest import without_extra


@pytest.fixture(autouse=True)
def default_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for extra in ("voice", "minilm", "use-multilingual", "hf"):
        without_extra(monkeypatch, extra)


def test_the_default_config_skips_transcription_with_the_command(tmp_path: Path) -> None:
    found = checks(tmp_path, {})
    check = found["Transcription"]
    assert (check.ok, check.detail) == (None, f"voice notes are not transcribed: {install_command('voice')}")
    assert found["Embedding model"].ok is True  # the default model needs no extra
    assert "Voice replies" not in found  # off by default


def test_a_transcription_endpoint_needs_no_extra(tmp_path: Path) -> None:
    endpoint = {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "whisper-1"}
    assert checks(tmp_path, {"media": {"transcription": endpoint}})["Transcription"].ok is True


@pytest.mark.parametrize(("model", "extra"), [("all-MiniLM-L6-v2", "minilm"), ("use-multilingual", "use-multilingual")])
def test_a_configured_embedding_model_without_its_extra_fails_naming_it(tmp_path: Path, model: str, extra: str) -> None:
    check = checks(tmp_path, {"embedding": {"model": model}})["Embedding model"]
    assert check.ok is False and check.fix == install_command(extra)
    assert check.detail.endswith(f"install it with: {install_command(extra)}") and "\n" not in check.detail


def test_local_voice_replies_without_the_extra_fail_naming_it(tmp_path: Path) -> None:
    check = checks(tmp_path, {"media": {"voice_replies": "when_spoken_to"}})["Voice replies"]
    assert check.ok is False and check.detail.startswith("the local voice needs the voice extra")
    assert check.fix == f"{install_command('voice')}, or set media.speech"


def test_a_model_folder_without_the_hf_extra_fails_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"onnx")
    (folder / "tokenizer.json").write_text("{}")
    check = checks(tmp_path, {"embedding": {"model_path": str(folder)}})["Embedding model"]
    assert check.ok is False and check.fix == install_command("hf")
