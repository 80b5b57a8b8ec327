"""Provider presets through the real config loader: what a user writes, what Teleton then talks to."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from teleton.config import ConfigError, load_config, require_llm
from teleton.config.presets import PRESETS, endpoint_for
from teleton.config.schema import ProviderName
from teleton.llm.connect import client_for
from teleton.llm.openai_provider import OpenAIProvider


def config_file(tmp_path: Path, agent: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("agent:\n" + "".join(f"  {line}\n" for line in agent.strip().splitlines()))
    return path


def test_the_schema_knows_every_preset() -> None:
    assert set(get_args(ProviderName)) == set(PRESETS)


async def test_ollama_and_a_model_name_is_a_whole_config(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, "provider: ollama\nmodel: qwen3:8b"), env={})
    require_llm(config, env={})  # a local server needs no key
    ep = endpoint_for(config.agent, env={})
    assert ep.base_url == "http://127.0.0.1:11434/v1" and ep.api_key is None
    assert config.agent.context_window == PRESETS["ollama"].context_window  # compaction thresholds follow it
    llm = client_for(config.agent, env={})
    try:
        assert isinstance(llm.provider, OpenAIProvider) and llm.settings.model == "qwen3:8b"
    finally:
        await llm.close()


def test_a_set_context_window_and_base_url_win(tmp_path: Path) -> None:
    text = "provider: ollama\nmodel: qwen3:8b\ncontext_window: 40960\nbase_url: http://gpu-box:11434/v1"
    config = load_config(config_file(tmp_path, text), env={})
    assert config.agent.context_window == 40960
    assert endpoint_for(config.agent, env={}).base_url == "http://gpu-box:11434/v1"


def test_the_default_is_anthropic_as_before(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, "model: claude-sonnet-4-5"), env={"ANTHROPIC_API_KEY": "sk-ant"})
    assert config.agent.provider == "anthropic" and config.agent.context_window == 200_000
    assert config.agent.api_key == "sk-ant"
    with pytest.raises(ConfigError, match=r"set ANTHROPIC_API_KEY or agent.api_key"):
        require_llm(load_config(config_file(tmp_path, "model: x"), env={}), env={})


def test_an_unknown_provider_is_one_line_listing_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_file(tmp_path, "provider: olama"), env={})
    message = str(caught.value)
    assert "\n" not in message and "agent.provider" in message and "'olama'" in message
    assert all(f"'{name}'" in message for name in PRESETS)


def test_a_hosted_provider_takes_its_own_key_never_anthropics(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant", "GROQ_API_KEY": "gsk-1"}
    config = load_config(config_file(tmp_path, "provider: groq\nmodel: llama-3.3-70b-versatile"), env=env)
    assert endpoint_for(config.agent, env=env).api_key == "gsk-1"
    with pytest.raises(ConfigError, match=r"set GROQ_API_KEY or agent.api_key"):
        require_llm(config, env={"ANTHROPIC_API_KEY": "sk-ant"})


def test_a_model_without_tools_is_refused_at_start_in_one_line(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, "provider: ollama\nmodel: gemma2:2b\nsupports_tools: false"), env={})
    with pytest.raises(ConfigError) as caught:
        require_llm(config, env={})
    assert "\n" not in str(caught.value) and "gemma2:2b" in str(caught.value) and "tool calling" in str(caught.value)


def test_openai_compatible_needs_its_url(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, "provider: openai_compatible\nmodel: m"), env={})
    with pytest.raises(ConfigError, match=r"agent.base_url: required for provider openai_compatible"):
        require_llm(config, env={})


def test_teleton_models_lists_every_preset(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "models"], capture_output=True, text=True, check=True, timeout=120
    )
    for preset in PRESETS.values():
        assert preset.name in done.stdout
        if preset.base_url:
            assert preset.base_url in done.stdout
        if preset.key_env:
            assert preset.key_env in done.stdout
