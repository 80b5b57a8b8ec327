"""The model client for a config: the provider its preset names, the key and URL resolved."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from teleton.llm.client import LLMClient, LLMSettings
from teleton.llm.presets import Endpoint, endpoint_for
from teleton.llm.types import Provider


def client_for(agent: Any, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMClient:
    """An ``LLMClient`` for ``config.agent``; ``overrides`` change its settings (e.g. fewer retries)."""
    settings = LLMSettings.from_config(agent, **overrides)
    ep = endpoint_for(agent, env)
    return LLMClient(settings, api_key=ep.api_key, base_url=ep.base_url, provider=provider_for(ep))


def provider_for(ep: Endpoint) -> Provider | None:
    """The provider module that speaks to ``ep``; None lets ``LLMClient`` build its default (Anthropic)."""
    if ep.preset.family == "anthropic":
        return None
    from teleton.llm.openai_provider import OpenAIProvider

    return OpenAIProvider(
        api_key=ep.api_key, base_url=ep.base_url, vision=ep.preset.vision, max_tokens_field=ep.preset.max_tokens_field
    )
