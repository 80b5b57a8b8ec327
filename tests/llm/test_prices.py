"""Prices by provider and model name: dated Anthropic names match their family, local servers are free,
an unknown model has no price (no spend shown rather than a guess), a configured price wins; a prompt-cache
write is priced by the provider's rule (Anthropic: 1.25x input for a 5-minute entry, 2x for a 1-hour one;
the others bill none), unless the configured price names its own."""

from __future__ import annotations

from teleton.config.schema import AgentConfig, PriceConfig
from teleton.llm.connect import client_for
from teleton.llm.prices import FREE, Price, price_for, usd


def test_names_match_their_family_and_unknown_ones_have_no_price() -> None:
    assert price_for("anthropic", "claude-sonnet-4-5-20250929") == Price(3.0, 15.0, 0.30, 3.75)
    assert price_for("anthropic", "claude-haiku-4-5") == Price(1.0, 5.0, 0.10, 1.25)
    assert price_for("anthropic", "claude-opus-4-1") == Price(15.0, 75.0, 1.50, 18.75)
    assert price_for("openai", "gpt-4.1-mini") == Price(0.40, 1.60, 0.10, 0.40)
    assert price_for("openai", "gpt-4.1") == Price(2.0, 8.0, 0.50, 2.0)
    assert price_for("deepseek", "deepseek-chat") == Price(0.28, 0.42, 0.028, 0.28)
    assert price_for("ollama", "qwen3:8b") == FREE
    assert price_for("openai_compatible", "qwen3:8b") is None  # may be a paid API: unknown, not free
    assert price_for("openrouter", "anthropic/claude-sonnet-4.5") is None


def test_a_cache_write_costs_what_the_provider_charges_for_the_entrys_lifetime() -> None:
    assert price_for("anthropic", "claude-sonnet-4-5", cache_ttl="5m") == Price(3.0, 15.0, 0.30, 3.75)
    assert price_for("anthropic", "claude-sonnet-4-5", cache_ttl="1h") == Price(3.0, 15.0, 0.30, 6.0)
    assert price_for("openai", "gpt-4.1", cache_ttl="1h") == Price(2.0, 8.0, 0.50, 2.0)  # no write billed
    # The client the daemon builds takes the lifetime from the config.
    for ttl, write in (("5m", 3.75), ("1h", 6.0)):
        agent = AgentConfig.model_validate({"api_key": "k", "model": "claude-sonnet-4-5", "cache_ttl": ttl})
        assert client_for(agent, env={}).price == Price(3.0, 15.0, 0.30, write)


def test_a_configured_price_wins() -> None:
    override = PriceConfig(input=1, output=2, cache_read=0.5)
    assert price_for("anthropic", "claude-sonnet-4-5", override) == Price(1.0, 2.0, 0.5, 1.25)  # the rule, on it
    assert price_for("anthropic", "claude-sonnet-4-5", override, "1h") == Price(1.0, 2.0, 0.5, 2.0)
    assert price_for("ollama", "qwen3:8b", override) == Price(1.0, 2.0, 0.5, 1.0)
    written = PriceConfig(input=1, output=2, cache_read=0.5, cache_write=1.5)
    assert price_for("anthropic", "claude-sonnet-4-5", written, "1h") == Price(1.0, 2.0, 0.5, 1.5)


def test_cost_and_its_display() -> None:
    assert Price(3.0, 15.0, 0.30).cost(100_000, 20_000, 400_000) == 0.72
    # 100k not cached, 20k out, 400k read, 200k written: 0.30 + 0.30 + 0.12 + 0.75 at 1.25x
    assert round(Price(3.0, 15.0, 0.30, 3.75).cost(100_000, 20_000, 400_000, 200_000), 6) == 1.47
    assert round(Price(3.0, 15.0, 0.30).cost(0, 0, 0, 200_000), 6) == 0.6  # no write price: the input price
    assert usd(0.72) == "$0.7200" and usd(1.4699) == "$1.47"
