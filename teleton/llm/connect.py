"""The model client for a config: the providers its presets name (main, fallbacks, utility), keys and URLs
resolved, and the main model's price."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from teleton.config.presets import Endpoint, endpoint, endpoint_for, key_of, preset
from teleton.llm.client import LLMClient, LLMSettings, anthropic_provider
from teleton.llm.failover import Route
from teleton.llm.prices import price_for
from teleton.llm.types import Provider


def client_for(
    agent: Any, env: Mapping[str, str] | None = None, *, clock: Callable[[], float] | None = None, **overrides: Any
) -> LLMClient:
    """An ``LLMClient`` for ``config.agent``; ``overrides`` change its settings (e.g. fewer retries), ``clock``
    replaces the monotonic clock of the failover cool-down (tests)."""
    env = os.environ if env is None else env
    settings = LLMSettings.from_config(agent, **overrides)
    ep = endpoint_for(agent, env)
    fallbacks = [_route(f.provider, f.model, f.base_url, f.api_key, env, settings) for f in agent.fallbacks]
    utility = None
    if agent.utility_provider or agent.utility_base_url or agent.utility_api_key:
        name = agent.utility_provider or agent.provider
        utility = _route(name, None, agent.utility_base_url, agent.utility_api_key, env, settings)
    extra: dict[str, Any] = {} if clock is None else {"clock": clock}
    return LLMClient(
        settings,
        api_key=ep.api_key,
        base_url=ep.base_url,
        provider=provider_for(ep),
        name=agent.provider,
        fallbacks=fallbacks,
        utility=utility,
        failover_retry_s=agent.failover_retry_s,
        price=price_for(agent.provider, agent.model, agent.price_per_mtok, agent.cache_ttl),
        **extra,
    )


def _route(
    name: str,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    env: Mapping[str, str],
    settings: LLMSettings,
) -> Route:
    """A provider other than the main one, its key from the config or else its preset's variable."""
    ep = endpoint(name, base_url=base_url, api_key=key_of(api_key, preset(name), env))
    return Route(name, provider_for(ep) or anthropic_provider(settings, ep.api_key, ep.base_url), model)


def provider_for(ep: Endpoint) -> Provider | None:
    """The provider module that speaks to ``ep``; None lets ``LLMClient`` build its default (Anthropic)."""
    if ep.preset.family == "anthropic":
        return None
    # Deferred: imports the openai SDK, which an Anthropic setup never needs
    from teleton.llm.openai_provider import OpenAIProvider

    return OpenAIProvider(
        api_key=ep.api_key,
        base_url=ep.base_url,
        vision=ep.preset.vision,
        max_tokens_field=ep.preset.max_tokens_field,
        cache_prompt=ep.preset.cache_prompt,
    )
