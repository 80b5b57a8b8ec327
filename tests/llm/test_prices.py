"""Prices by provider and model name: dated Anthropic names match their family, local servers are free,
an unknown model has no price (no spend shown rather than a guess), a configured price wins."""

from __future__ import annotations

from teleton.config.schema import PriceConfig
from teleton.llm.prices import FREE, Price, price_for, usd


def test_names_match_their_family_and_unknown_ones_have_no_price() -> None:
    assert price_for("anthropic", "claude-sonnet-4-5-20250929") == Price(3.0, 15.0, 0.30)
    assert price_for("anthropic", "claude-haiku-4-5") == Price(1.0, 5.0, 0.10)
    assert price_for("anthropic", "claude-opus-4-1") == Price(15.0, 75.0, 1.50)
    assert price_for("openai", "gpt-4.1-mini") == Price(0.40, 1.60, 0.10)
    assert price_for("openai", "gpt-4.1") == Price(2.0, 8.0, 0.50)
    assert price_for("deepseek", "deepseek-chat") == Price(0.28, 0.42, 0.028)
    assert price_for("ollama", "qwen3:8b") == FREE
    assert price_for("openai_compatible", "qwen3:8b") is None  # may be a paid API: unknown, not free
    assert price_for("openrouter", "anthropic/claude-sonnet-4.5") is None


def test_a_configured_price_wins() -> None:
    override = PriceConfig(input=1, output=2, cache_read=0.5)
    assert price_for("anthropic", "claude-sonnet-4-5", override) == Price(1.0, 2.0, 0.5)
    assert price_for("ollama", "qwen3:8b", override) == Price(1.0, 2.0, 0.5)


def test_cost_and_its_display() -> None:
    assert Price(3.0, 15.0, 0.30).cost(100_000, 20_000, 400_000) == 0.72
    assert usd(0.72) == "$0.7200" and usd(1.4699) == "$1.47"
