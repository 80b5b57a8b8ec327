"""Scrub secrets from anything that is about to be logged.

Secrets reach logs in two ways: as a field whose name says what it is (``api_key=...``) and inside free
text (an exception message that quotes a URL with a bot token, a phone number in a Telethon error). Both
are covered: by key name, and by patterns for each secret kind Teleton handles.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from typing import Any

REDACTED = "[redacted]"

SECRET_KEYS = frozenset(
    {
        "api_key",
        "api_hash",
        "bot_token",
        "token",
        "phone",
        "phone_number",
        "password",
        "session",
        "session_string",
        "voyage_api_key",
        "authorization",
        "x-api-key",
    }
)

# Secrets that can be all digits. Under any other secret's name a number is a count, an id or a timing (the
# ``session`` stage's milliseconds, a session's row id), never the secret, which is text.
DIGIT_SECRETS = frozenset({"phone", "phone_number", "password"})

SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    # Anthropic and other "sk-" style API keys.
    re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_\-]{16,}"),
    # Voyage AI keys.
    re.compile(r"\bpa-[A-Za-z0-9_\-]{20,}"),
    # Telegram bot tokens: <bot id>:<35 char secret>.
    re.compile(r"(?<!\d)\d{6,12}:[A-Za-z0-9_\-]{30,}"),
    # Telethon StringSession: a version digit followed by a long url-safe base64 blob.
    re.compile(r"\b1[A-Za-z0-9_\-+/]{150,}={0,2}"),
    # Phone numbers in international form (+ and 7..15 digits, optional separators).
    re.compile(r"\+\d[\d \-]{6,18}\d"),
)


def redact_text(text: str) -> str:
    for pattern in SECRET_PATTERNS:
        text = pattern.sub(REDACTED, text)
    return text


def is_secret_field(key: str, value: Any) -> bool:
    name = key.lower()
    if name not in SECRET_KEYS or value is None or value == "":
        return False
    return name in DIGIT_SECRETS or not isinstance(value, int | float)


def redact_value(key: str, value: Any) -> Any:
    if is_secret_field(key, value):
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value("", v) for v in value)
    if isinstance(value, BaseException):
        return redact_text(f"{type(value).__name__}: {value}")
    return value


def redact_event(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """A structlog processor: every field, and the rendered exception text, are redacted."""
    return {key: redact_value(key, value) for key, value in event_dict.items()}
