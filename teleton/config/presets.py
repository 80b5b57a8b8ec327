"""Named model providers: where each one is, which key it needs and what it can do.

``provider: ollama`` and ``model: qwen3:8b`` is a whole config: the preset gives the base URL, says that no
key is needed, and gives a context window for the compaction thresholds. ``agent.base_url`` and
``agent.api_key`` override a preset; ``openai_compatible`` is any other endpoint (its base URL required).

The flags say what Teleton may rely on: ``tools`` (tool calling: Teleton cannot work without it),
``vision`` (images are sent; otherwise each is replaced by a note), ``caching`` (the provider caches prompt
prefixes and reports cached tokens). Local servers depend on the model loaded: their flags are the common
case, and the context window is a cautious default (raise ``agent.context_window`` to what the server runs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Family = Literal["anthropic", "openai"]


@dataclass(frozen=True)
class Preset:
    name: str
    family: Family  # which provider module speaks to it
    base_url: str | None  # None: the SDK's default (Anthropic), or required from the config (openai_compatible)
    key_env: str | None  # the variable holding the key; None: no key needed (a local server)
    context_window: int
    tools: bool = True
    vision: bool = False
    caching: bool = False
    max_tokens_field: str = "max_tokens"
    # Ask the server to keep the KV cache of the prompt for the next request (llama.cpp's ``cache_prompt``;
    # a request that extends the last one's prefix then computes only what is new).
    cache_prompt: bool = False

    @property
    def local(self) -> bool:
        return self.key_env is None


LOCAL_WINDOW = 32_768
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("anthropic", "anthropic", None, "ANTHROPIC_API_KEY", 200_000, vision=True, caching=True),
        Preset(
            "openai",
            "openai",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            128_000,
            vision=True,
            caching=True,
            max_tokens_field="max_completion_tokens",
        ),
        Preset("openrouter", "openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", 128_000, vision=True),
        Preset("groq", "openai", "https://api.groq.com/openai/v1", "GROQ_API_KEY", 131_072),
        Preset("deepseek", "openai", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", 128_000, caching=True),
        Preset("mistral", "openai", "https://api.mistral.ai/v1", "MISTRAL_API_KEY", 128_000, vision=True),
        Preset("together", "openai", "https://api.together.xyz/v1", "TOGETHER_API_KEY", 128_000),
        Preset("xai", "openai", "https://api.x.ai/v1", "XAI_API_KEY", 131_072, vision=True, caching=True),
        Preset(
            "gemini",
            "openai",
            "https://generativelanguage.googleapis.com/v1beta/openai/",
            "GEMINI_API_KEY",
            1_048_576,
            vision=True,
        ),
        Preset("ollama", "openai", "http://127.0.0.1:11434/v1", None, LOCAL_WINDOW),
        Preset("vllm", "openai", "http://127.0.0.1:8000/v1", None, LOCAL_WINDOW),
        Preset("lmstudio", "openai", "http://127.0.0.1:1234/v1", None, LOCAL_WINDOW),
        Preset("llamacpp", "openai", "http://127.0.0.1:8080/v1", None, LOCAL_WINDOW, cache_prompt=True),
        Preset("openai_compatible", "openai", None, None, LOCAL_WINDOW),
    )
}


class PresetError(ValueError):
    """A provider setting that cannot work, worded for the person who has to fix it (one line)."""


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise PresetError(f"agent.provider: unknown provider {name!r} (known: {', '.join(PRESETS)})") from None


@dataclass(frozen=True)
class Endpoint:
    """A provider as configured: the preset with the config's base URL, key and tool verdict applied."""

    preset: Preset
    base_url: str | None
    api_key: str | None
    tools: bool


def endpoint(
    provider: str, *, base_url: str | None, api_key: str | None, supports_tools: bool | None = None
) -> Endpoint:
    p = preset(provider)
    tools = p.tools if supports_tools is None else supports_tools
    return Endpoint(preset=p, base_url=base_url or p.base_url, api_key=api_key, tools=tools)


def key_of(given: str | None, p: Preset | None, env: Mapping[str, str] | None = None) -> str | None:
    """The key a setting gives, or else the one in the preset's environment variable (None: neither)."""
    env = os.environ if env is None else env
    return given or (env.get(p.key_env) if p is not None and p.key_env else None)


def endpoint_for(agent: Any, env: Mapping[str, str] | None = None) -> Endpoint:
    """From ``config.agent``: its key, or else the one in the preset's environment variable."""
    api_key = key_of(agent.api_key, preset(agent.provider), env)
    return endpoint(agent.provider, base_url=agent.base_url, api_key=api_key, supports_tools=agent.supports_tools)


def service_endpoint(
    section: str,
    *,
    name: str | None,
    base_url: str | None,
    api_key: str | None,
    example: str,
    env: Mapping[str, str] | None = None,
) -> tuple[str, str | None, Preset | None]:
    """(base URL, key or None, preset or None) of an OpenAI-style service beside the agent's model (embeddings,
    transcription, speech): the preset ``name`` gives a default URL and key variable, ``base_url`` and
    ``api_key`` win. PresetError names the ``section`` key to fix; ``example`` is a URL or preset that would do."""
    found = None
    if name:
        found = PRESETS.get(name)
        if found is None:
            raise PresetError(f"{section}.preset: unknown preset {name!r} (known: {', '.join(PRESETS)})")
        if found.family != "openai" or found.base_url is None:
            raise PresetError(f"{section}.preset: {name} has no OpenAI-style endpoint for this")
        base_url = base_url or found.base_url
    if not base_url:
        raise PresetError(f"{section}.base_url: required ({example})")
    key = key_of(api_key, found, env)
    if found is not None and found.key_env and not key:
        raise PresetError(f"{section}.api_key: required for {name} (set {found.key_env} or {section}.api_key)")
    return base_url.rstrip("/"), key, found


def problem(ep: Endpoint, model: str) -> str | None:
    """Why this endpoint cannot run the agent, as one line naming the fix; None when it can."""
    name = ep.preset.name
    if ep.preset.family == "openai" and not ep.base_url:
        return f"agent.base_url: required for provider {name} (the server's URL, e.g. http://127.0.0.1:8000/v1)"
    if not ep.tools:
        return (
            f"agent.model: {model} on provider {name} has no tool calling, which Teleton needs: "
            "choose a model with tool calling (or set agent.supports_tools: true if it has it)"
        )
    if ep.preset.key_env and not ep.api_key:
        return f"agent.api_key: required value is missing (set {ep.preset.key_env} or agent.api_key in the config)"
    return None
