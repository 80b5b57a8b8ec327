"""What a model costs per million tokens, where known, and what a turn or a session therefore spent.

Prices are the providers' published list prices (late 2025) in US dollars. A local server costs nothing; a
model not listed here has no price, and no spend is shown for it rather than a guess. A config's
``agent.price_per_mtok`` wins over the table (a negotiated rate, a new model, a router's mark-up).
A prompt-cache write is priced by the provider's rule (``cache_write_price``): Anthropic bills it at 1.25x
the input price for a 5-minute entry and 2x for a 1-hour one (``agent.cache_ttl``); OpenAI and the others
bill no write (they report none), so their writes, if any, cost the input price.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

# Anthropic's cache-write price as a multiple of the input price, by the cache entry's lifetime.
ANTHROPIC_WRITE_FACTOR = {"5m": 1.25, "1h": 2.0}


@dataclass(frozen=True)
class Price:
    """US dollars per 1M tokens. ``cache_write`` None: at the input price (``price_for`` always sets it)."""

    input: float
    output: float
    cache_read: float
    cache_write: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int, cache_write_tokens: int = 0) -> float:
        """Dollars for these token counts, in the API's terms: ``input_tokens`` are neither read from nor
        written to the cache."""
        write = self.input if self.cache_write is None else self.cache_write
        return (
            input_tokens * self.input
            + output_tokens * self.output
            + cache_read_tokens * self.cache_read
            + cache_write_tokens * write
        ) / 1_000_000


FREE = Price(0.0, 0.0, 0.0, 0.0)
# Servers on the user's own machine. Not openai_compatible: it needs no key by default, yet may be a paid API.
LOCAL = frozenset({"ollama", "vllm", "lmstudio", "llamacpp"})

# (provider, pattern on the model name): the first match wins, so a specific name comes before its family.
# Anthropic's names carry dates and aliases (claude-sonnet-4-5-20250929, claude-3-7-sonnet-latest): patterns.
TABLE: tuple[tuple[str, str, Price], ...] = (
    ("anthropic", r"opus-4-[5-9]", Price(5.0, 25.0, 0.50)),
    ("anthropic", r"opus", Price(15.0, 75.0, 1.50)),
    ("anthropic", r"sonnet", Price(3.0, 15.0, 0.30)),
    ("anthropic", r"haiku-4", Price(1.0, 5.0, 0.10)),
    ("anthropic", r"3-5-haiku", Price(0.80, 4.0, 0.08)),
    ("anthropic", r"3-haiku", Price(0.25, 1.25, 0.03)),
    ("openai", r"^gpt-5-nano", Price(0.05, 0.40, 0.005)),
    ("openai", r"^gpt-5-mini", Price(0.25, 2.0, 0.025)),
    ("openai", r"^gpt-5", Price(1.25, 10.0, 0.125)),
    ("openai", r"^gpt-4\.1-nano", Price(0.10, 0.40, 0.025)),
    ("openai", r"^gpt-4\.1-mini", Price(0.40, 1.60, 0.10)),
    ("openai", r"^gpt-4\.1", Price(2.0, 8.0, 0.50)),
    ("openai", r"^gpt-4o-mini", Price(0.15, 0.60, 0.075)),
    ("openai", r"^gpt-4o", Price(2.50, 10.0, 1.25)),
    ("openai", r"^o4-mini", Price(1.10, 4.40, 0.275)),
    ("openai", r"^o3", Price(2.0, 8.0, 0.50)),
    ("groq", r"llama-3\.3-70b", Price(0.59, 0.79, 0.59)),
    ("groq", r"llama-3\.1-8b", Price(0.05, 0.08, 0.05)),
    ("deepseek", r"^deepseek-(chat|reasoner)", Price(0.28, 0.42, 0.028)),
)


def price_for(provider: str, model: str, override: Any = None, cache_ttl: str = "5m") -> Price | None:
    """The price of ``model`` on ``provider``: the config's override, free for a local server, else the table;
    its cache write by the provider's rule for ``cache_ttl`` (``agent.cache_ttl``)."""
    if override is not None:
        price = Price(float(override.input), float(override.output), float(override.cache_read))
    elif provider in LOCAL:
        return FREE
    else:
        listed = next((p for name, pattern, p in TABLE if name == provider and re.search(pattern, model)), None)
        if listed is None:
            return None
        price = listed
    return replace(price, cache_write=cache_write_price(provider, price.input, cache_ttl, override))


def cache_write_price(provider: str, input_price: float, cache_ttl: str, override: Any = None) -> float:
    """What a prompt-cache write costs per 1M tokens: the override's ``cache_write`` where set, else the
    provider's rule (Anthropic: a multiple of the input price by the entry's lifetime; the others: input)."""
    if override is not None and getattr(override, "cache_write", None) is not None:
        return float(override.cache_write)
    if provider == "anthropic":
        return input_price * ANTHROPIC_WRITE_FACTOR[cache_ttl]
    return input_price


def usd(amount: float) -> str:
    """Dollars as /status shows them: cents for real money, four decimals for a cheap turn."""
    return f"${amount:.2f}" if amount >= 1 else f"${amount:.4f}"
