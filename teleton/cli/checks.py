"""One line of `teleton doctor`: what was checked, whether it passed, and the fix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Check:
    name: str
    ok: bool | None  # None: not checked (what it needs is missing)
    detail: str
    fix: str = ""


def provider_label(provider: str) -> str:
    return "Anthropic" if provider == "anthropic" else provider
