"""`teleton doctor` for any provider: no key demanded from a local server; `--online` makes one cheap call to
the main model's provider and one to a remote embedding endpoint, each over real HTTP on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from teleton.cli.doctor import Check, run_checks
from tests.conftest import requires_extra
from tests.fakes.openai_embeddings import FakeEmbeddings
from tests.fakes.openai_server import FakeOpenAI, oa_error


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def checks(tmp_path: Path, config: dict[str, Any], *, online: bool = False) -> dict[str, Check]:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}, **config}))
    path.chmod(0o600)
    return {c.name: c for c in run_checks(path, online=online)}


def test_a_local_provider_needs_no_key(tmp_path: Path) -> None:
    found = checks(tmp_path, {"agent": {"provider": "ollama", "model": "qwen3:8b"}})
    assert found["ollama API key"].ok is True and "not needed" in found["ollama API key"].detail
    found = checks(tmp_path, {"agent": {"provider": "openai", "model": "gpt-4.1-mini"}})
    key = found["openai API key"]
    assert key.ok is False and "OPENAI_API_KEY" in key.fix


def test_online_ok_for_a_reachable_provider(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    config = {"agent": {"provider": "vllm", "model": "qwen3:8b", "base_url": fake_openai.base_url}}
    found = checks(tmp_path, config, online=True)
    assert found["vllm API (online)"].ok is True, found["vllm API (online)"]
    assert len(fake_openai.requests) == 1 and fake_openai.requests[0]["model"] == "qwen3:8b"


def test_online_fail_with_the_fix_for_a_rejected_key(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.responder = lambda body: oa_error(401, "Incorrect API key provided")
    config = {"agent": {"provider": "openai", "model": "gpt-4.1-mini", "base_url": fake_openai.base_url,
                        "api_key": "sk-wrong"}}  # fmt: skip
    check = checks(tmp_path, config, online=True)["openai API (online)"]
    assert (check.ok, check.detail) == (False, "API key rejected")
    assert "OPENAI_API_KEY" in check.fix and len(fake_openai.requests) == 1  # rejected at once, not retried


def test_online_checks_a_remote_embedding_endpoint(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    agent = {"provider": "ollama", "model": "qwen3:8b", "base_url": fake_openai.base_url}
    with FakeEmbeddings(key="right", dims={"nomic-embed-text": 16}) as fake:
        embedding = {"provider": "openai_compatible", "base_url": fake.base_url, "model": "nomic-embed-text"}
        found = checks(tmp_path, {"agent": agent, "embedding": {**embedding, "api_key": "right"}}, online=True)
        assert found["Embedding model"].ok is True
        assert found["Embeddings (online)"].ok is True and "16-dim" in found["Embeddings (online)"].detail
        found = checks(tmp_path, {"agent": agent, "embedding": {**embedding, "api_key": "wrong"}}, online=True)
    check = found["Embeddings (online)"]
    assert check.ok is False and "HTTP 401" in check.detail and "\n" not in check.detail


@requires_extra("voice")  # the local parts; without the extra: tests/cli/test_doctor_extras.py
def test_transcription_is_checked_for_each_provider(tmp_path: Path) -> None:
    found = checks(tmp_path, {})
    assert found["Transcription"].ok is True and found["Transcription"].detail == "local whisper-base"
    missing = checks(tmp_path, {"media": {"transcription": {"model_path": str(tmp_path / "no-such-model")}}})
    assert missing["Transcription"].ok is False and "no-such-model" in missing["Transcription"].detail
    groq = checks(tmp_path, {"media": {"transcription": {"provider": "openai_compatible", "preset": "groq"}}})
    assert groq["Transcription"].ok is False and "GROQ_API_KEY" in groq["Transcription"].detail
    local = {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "whisper-1"}
    assert checks(tmp_path, {"media": {"transcription": local}})["Transcription"].ok is True


@requires_extra("voice")  # the local parts; without the extra: tests/cli/test_doctor_extras.py
def test_the_voice_of_voice_replies_is_checked_when_they_are_on(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert "Voice replies" not in checks(tmp_path, {})  # off by default: nothing to check
    local = checks(tmp_path, {"media": {"voice_replies": "when_spoken_to"}})["Voice replies"]
    assert local.ok is True and local.detail == "when_spoken_to: eSpeak NG, local"
    openai = {"voice_replies": "always", "speech": {"provider": "openai_compatible"}}
    check = checks(tmp_path, {"media": openai})["Voice replies"]
    assert check.ok is False and "OPENAI_API_KEY" in check.detail and "media.speech" in check.fix


def test_each_fallback_key_is_checked_before_the_day_it_is_needed(tmp_path: Path, monkeypatch: Any) -> None:
    fallbacks = [{"provider": "openai", "model": "gpt-4.1"}, {"provider": "ollama", "model": "qwen3:8b"}]
    found = checks(tmp_path, {"agent": {"fallbacks": fallbacks}})
    assert found["Fallback openai (gpt-4.1) key"].ok is False
    assert "OPENAI_API_KEY" in found["Fallback openai (gpt-4.1) key"].fix
    assert found["Fallback ollama (qwen3:8b) key"].ok is True
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert checks(tmp_path, {"agent": {"fallbacks": fallbacks}})["Fallback openai (gpt-4.1) key"].ok is True
