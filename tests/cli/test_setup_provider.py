"""`teleton setup` asks for the model provider and offers a local server it finds on 127.0.0.1."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from teleton.cli.setup_provider import ModelChoice, agent_settings, detect_local
from teleton.config import load_config
from tests.cli.test_setup_login import DOWN, ENTER, _cli, _keys, _wizard
from tests.fakes.openai_embeddings import FakeEmbeddings

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_a_running_local_server_is_found_with_its_models() -> None:
    with FakeEmbeddings(dims={"qwen3:8b": 8, "nomic-embed-text": 8}) as ollama:
        found = detect_local({"ollama": ollama.base_url, "vllm": closed_port_url()})
    assert [(s.name, s.models) for s in found] == [("ollama", ["qwen3:8b", "nomic-embed-text"])]


def test_the_wizard_offers_the_found_ollama_and_writes_it(tmp_path: Path, monkeypatch: Any) -> None:
    with FakeEmbeddings(dims={"qwen3:8b": 8}) as ollama:
        typed = _keys(DOWN + DOWN + ENTER, ENTER, ENTER)  # terminal only; the found Ollama; its first model
        result, path = _wizard(tmp_path, monkeypatch, typed, local={"ollama": ollama.base_url})
    assert result.exit_code == 0, result.output
    agent = load_config(path).agent
    assert (agent.provider, agent.model, agent.utility_model, agent.api_key) == ("ollama", "qwen3:8b", "qwen3:8b", None)
    # The preset's URL is used: nothing but the provider name is written.
    assert "base_url" not in yaml.safe_load(path.read_text())["agent"]


def test_with_no_local_server_the_question_still_works(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # terminal only; provider list starts at anthropic: one down is openai; a model; its key
    typed = _keys(DOWN + DOWN + ENTER, DOWN + ENTER, "gpt-4.1-mini" + ENTER, "sk-openai" + ENTER)
    result, path = _wizard(tmp_path, monkeypatch, typed, local={"ollama": closed_port_url()})
    assert result.exit_code == 0, result.output
    agent = load_config(path).agent
    assert (agent.provider, agent.model, agent.api_key) == ("openai", "gpt-4.1-mini", "sk-openai")


def test_setup_run_again_offers_the_server_url_and_model_it_has(tmp_path: Path, monkeypatch: Any) -> None:
    agent = {"provider": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "my-model"}
    # terminal only; the provider it has (the default); Enter keeps the URL; Enter keeps the model; no key
    typed = _keys(DOWN + DOWN + ENTER, ENTER, ENTER, ENTER, ENTER)
    result, path = _wizard(tmp_path, monkeypatch, typed, local={}, existing={"agent": agent})
    assert result.exit_code == 0, result.output
    written = load_config(path).agent
    assert (written.provider, written.base_url, written.model) == (
        "openai_compatible",
        "http://127.0.0.1:9/v1",
        "my-model",
    )


def test_non_interactive_provider_flags(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    base = ["setup", "--non-interactive", "--mode", "terminal"]
    result = CliRunner().invoke(_cli(), [*base, "--provider", "ollama"], terminal_width=200)
    assert result.exit_code == 2 and "--model is required with --provider ollama" in result.output
    result = CliRunner().invoke(_cli(), [*base, "--provider", "nope"], terminal_width=200)
    assert result.exit_code == 2 and "--provider must be one of" in result.output
    result = CliRunner().invoke(_cli(), [*base, "--provider", "ollama", "--model", "qwen3:8b"], terminal_width=200)
    assert result.exit_code == 0, result.output
    agent = load_config(path).agent
    assert (agent.provider, agent.model) == ("ollama", "qwen3:8b")


def test_switching_provider_drops_the_old_key_url_and_models() -> None:
    existing = {"provider": "anthropic", "api_key": "sk-ant", "base_url": "https://proxy", "model": "claude-x",
                "max_tokens": 2048}  # fmt: skip
    agent = agent_settings(existing, ModelChoice("ollama", "qwen3:8b", None))
    assert agent == {"provider": "ollama", "model": "qwen3:8b", "utility_model": "qwen3:8b", "max_tokens": 2048}
    back = agent_settings(agent, ModelChoice("anthropic", None, "sk-new"))
    assert back == {"provider": "anthropic", "api_key": "sk-new", "max_tokens": 2048}


def test_setup_builds_the_default_embedding_model_so_the_first_start_does_not(tmp_path: Path, monkeypatch: Any) -> None:
    cache = tmp_path / "cache"  # an empty model cache: this setup pays e5's one build (~8 s)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    base = ["setup", "--non-interactive", "--mode", "terminal"]
    result = CliRunner().invoke(_cli(), base, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "embedding model multilingual-e5-small-int8 ready" in result.output
    assert (cache / "teleton" / "models" / "multilingual-e5-small-int8" / "manifest.json").is_file()
    # A model that cannot load is one line, and setup still finishes (the daemon searches by keyword then).
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")},
                                    "embedding": {"model_path": str(tmp_path / "nowhere")}}))  # fmt: skip
    result = CliRunner().invoke(_cli(), base, terminal_width=200)
    assert result.exit_code == 0, result.output
    warning = [line for line in result.output.splitlines() if "embedding model not ready" in line]
    assert len(warning) == 1 and "nowhere" in warning[0]
