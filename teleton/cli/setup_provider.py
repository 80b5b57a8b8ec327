"""The model questions of `teleton setup`: which provider, which model, its key; local servers found first.

A local model server (Ollama, LM Studio, vLLM, llama.cpp) is looked for on its default port with one short
``GET /models`` each: one that answers is offered first, with the models it has, so a user who runs Ollama
only presses Enter. Nothing is installed or started; a server not running is simply not offered.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from teleton.config.presets import PRESETS, preset

# Where each local server listens by default (the presets' URLs); tests point these at a fake server.
LOCAL_URLS: dict[str, str] = {name: p.base_url for name, p in PRESETS.items() if p.local and p.base_url is not None}
PROBE_TIMEOUT_S = 0.5  # a server on 127.0.0.1 answers in milliseconds; a closed port is refused at once
LABELS = {
    "anthropic": "Anthropic (Claude)",
    "openai": "OpenAI",
    "openrouter": "OpenRouter (many models, one key)",
    "gemini": "Google Gemini",
    "ollama": "Ollama (local)",
    "lmstudio": "LM Studio (local)",
    "vllm": "vLLM (local)",
    "llamacpp": "llama.cpp server (local)",
    "openai_compatible": "another OpenAI-compatible server (its URL asked)",
}


@dataclass(frozen=True)
class LocalServer:
    name: str  # the preset
    base_url: str
    models: list[str]


@dataclass(frozen=True)
class ModelChoice:
    provider: str
    model: str | None  # None: keep the configured one (Anthropic's defaults)
    api_key: str | None
    base_url: str | None = None


def detect_local(urls: Mapping[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S) -> list[LocalServer]:
    """The local servers that answer ``GET {url}/models``, with the model ids they list."""
    found = []
    for name, url in (LOCAL_URLS if urls is None else urls).items():
        try:
            response = httpx.get(url.rstrip("/") + "/models", timeout=timeout)
            response.raise_for_status()
            models = [str(m["id"]) for m in response.json().get("data", []) if isinstance(m, dict) and "id" in m]
        except (httpx.HTTPError, ValueError, TypeError, AttributeError):
            continue  # not running, or something else on that port
        found.append(LocalServer(name, url, models))
    return found


def provider_problem(provider: str | None, model: str | None, base_url: str | None) -> list[str]:
    """What is wrong with --provider / --model / --base-url, in words a person can act on."""
    if provider is None:
        return []
    if provider not in PRESETS:
        return [f"--provider must be one of {', '.join(PRESETS)}"]
    problems = []
    if provider != "anthropic" and not model:
        problems.append(f"--model is required with --provider {provider} (e.g. qwen3:8b for ollama)")
    if preset(provider).base_url is None and provider != "anthropic" and not base_url:
        problems.append(f"--base-url is required with --provider {provider} (e.g. http://127.0.0.1:8000/v1)")
    return problems


def agent_settings(existing: Mapping[str, Any], choice: ModelChoice) -> dict[str, Any]:
    """The ``agent`` section to write; the utility model is the same model (a local server runs one).

    Switching provider drops the old one's URL, key and model names: a key is never sent to another
    provider, and Claude's model names mean nothing to Ollama (nor the other way round)."""
    settings = dict(existing)
    if (existing.get("provider") or "anthropic") != choice.provider:
        for key in ("base_url", "api_key", "model", "utility_model"):
            settings.pop(key, None)
    settings["provider"] = choice.provider
    if choice.model:
        settings.update(model=choice.model, utility_model=choice.model)
    if choice.base_url:
        settings["base_url"] = choice.base_url
    if choice.api_key:
        settings["api_key"] = choice.api_key
    return settings


def ask_model(questionary: Any, need: Any, existing_agent: Mapping[str, Any]) -> ModelChoice:
    """Provider (found local servers first), then model and key as that provider needs them."""
    servers = {s.name: s for s in detect_local()}
    choices = [
        questionary.Choice(f"{LABELS[s.name]} found at {s.base_url} ({len(s.models)} models)", s.name)
        for s in servers.values()
    ]
    choices += [questionary.Choice(LABELS.get(name, name), name) for name in PRESETS if name not in servers]
    default = next(iter(servers), None) or existing_agent.get("provider") or "anthropic"
    provider = need(questionary.select("Model provider", choices=choices, default=default).ask())
    base_url = None
    if preset(provider).base_url is None and provider != "anthropic":
        # Run again, setup offers the server it already has (Enter keeps it).
        known = str(existing_agent.get("base_url") or "") if provider == existing_agent.get("provider") else ""
        asked = questionary.text(
            "Server URL (e.g. http://127.0.0.1:8000/v1)", default=known,
            validate=lambda v: bool(v.strip()) or "the server's URL, e.g. http://127.0.0.1:8000/v1",
        )  # fmt: skip
        base_url = need(asked.ask()).strip()
    model = None
    if provider != "anthropic":
        listed = servers[provider].models if provider in servers else []
        default_model = listed[0] if listed else str(existing_agent.get("model") or "")
        model = need(questionary.text("Model", default=default_model, validate=lambda v: bool(v.strip())).ask())
        model = model.strip()
    return ModelChoice(provider, model, ask_key(questionary, provider), base_url)


def ask_key(questionary: Any, provider: str) -> str | None:
    """The key, unless the provider needs none or its variable already holds one."""
    key_env = preset(provider).key_env
    if key_env is None or os.environ.get(key_env):
        return None
    name = LABELS.get(provider, provider).split(" (")[0]
    answer = questionary.password(f"{name} API key (empty to set {key_env} later)").ask()
    return (answer or "").strip() or None
