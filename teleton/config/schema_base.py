"""What every section of the schema shares: the base model, the lookup of a default, the provider names."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Policy = Literal["open", "allowlist", "admin-only", "disabled"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def default(section: type[Section], name: str) -> Any:
    """The schema's default for one setting: what a module's own dataclass defaults to, so the number has
    one home (a test builds every such dataclass and compares)."""
    return section.model_fields[name].default


# The names of teleton.config.presets.PRESETS (a test keeps the two in step).
ProviderName = Literal[
    "anthropic", "openai", "openrouter", "groq", "deepseek", "mistral", "together", "xai", "gemini",
    "ollama", "vllm", "lmstudio", "llamacpp", "openai_compatible",
]  # fmt: skip


def yaml_off(value: object) -> object:
    """A setting whose choices include "off": YAML 1.1 reads a bare `off` as false, so false means "off"."""
    return "off" if value is False else value
