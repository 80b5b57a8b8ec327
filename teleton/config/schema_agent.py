"""The ``agent`` section: the model, its provider and fallbacks, prices, the tool loop's limits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from teleton.config.presets import PRESETS
from teleton.config.schema_base import ProviderName, Section


class FallbackConfig(Section):
    """One provider of the failover chain; unset base_url / api_key come from its preset."""

    provider: ProviderName
    model: str
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)


class PriceConfig(Section):
    """US dollars per 1M tokens: overrides the preset's price (teleton.llm.prices)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(default=0.0, ge=0)
    # A prompt-cache write; None: the provider's rule (Anthropic: 1.25x input for 5m, 2x for 1h; others: input).
    cache_write: float | None = Field(default=None, ge=0)


class AgentConfig(Section):
    # Unset keys come from the provider's preset: base_url, the key's variable, context_window.
    provider: ProviderName = "anthropic"
    supports_tools: bool | None = None  # None: the preset's word
    api_key: str | None = Field(default=None, repr=False)
    base_url: str | None = None
    model: str = "claude-sonnet-4-5"
    utility_model: str = "claude-haiku-4-5"
    # The utility model's own provider (None: agent.provider's); its URL and key resolve through the same presets.
    utility_provider: ProviderName | None = None
    utility_base_url: str | None = None
    utility_api_key: str | None = Field(default=None, repr=False)
    # Tried in order when the main provider is still down after its retries; the primary again after the cool-down.
    fallbacks: list[FallbackConfig] = Field(default_factory=list)
    failover_retry_s: float = Field(default=60.0, gt=0)
    price_per_mtok: PriceConfig | None = None  # None: the preset's price for the model, where known
    max_tokens: int = Field(default=4096, ge=1)
    temperature: float = Field(default=0.7, ge=0.0, le=1.0)
    max_iterations: int = Field(default=10, ge=1)
    tool_timeout_s: float = Field(default=90.0, gt=0)
    tool_output_cap: int = Field(default=50_000, ge=1000)
    # A longer message is kept whole in the archive and the workspace; the model gets its head and tail.
    max_input_chars: int = Field(default=20_000, ge=1000)
    context_window: int = Field(default=200_000, ge=1000)
    request_timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=10, ge=0)
    retry_max_delay_s: float = Field(default=60.0, gt=0)
    # A user whose answer takes longer gets one short notice first (0: never); scheduled turns never do.
    slow_notice_s: float = Field(default=20.0, ge=0)
    # How long the provider keeps the prompt cache (Anthropic's two: 5 minutes, or 1 hour at twice the write price).
    cache_ttl: Literal["5m", "1h"] = "5m"

    @model_validator(mode="before")
    @classmethod
    def _preset_window(cls, data: object) -> object:
        """An unset (or null) context_window is the provider preset's: compaction thresholds derive from it."""
        if isinstance(data, dict) and data.get("context_window") is None:
            known = PRESETS.get(str(data.get("provider", "anthropic")))
            if known is not None:  # an unknown name is reported by the field's own check
                data = {**data, "context_window": known.context_window}
        return data
