"""Scrub secrets from anything that is about to be logged: one rule for every logger.

Secrets reach logs as a field whose name says what it is (``api_key=...``) and inside free text: an exception
message that quotes a URL with a bot token, a phone number in a Telethon error, a library's request line
with ``?api_key=`` in its URL (httpx2 logs every request), an ``Authorization: Bearer ...`` header, an MCP
server echoing on its stderr a value it was given from Teleton's environment. All are covered: by key name,
by patterns for each secret kind Teleton handles, by URL and header shape, and by the values ``remember``
was given. ``redact_event`` runs on structlog's events and, through ``foreign_pre_chain``, on every stdlib
record (its rendered message is the event), so nothing reaches a handler unredacted.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, MutableMapping
from typing import Any
from urllib.parse import quote

REDACTED = "[redacted]"
REMEMBER_MIN_CHARS = 6  # shorter values (``1``, ``true``, ``prod``) would redact ordinary words everywhere

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

# A header or setting whose name ends in one of these words holds a secret (``X-Api-Key``, ``access_token``,
# ``Proxy-Authorization``, ``client_secret``); ``max_tokens`` or ``token_count`` do not end in one.
_SECRET_NAME = (
    r"[A-Za-z0-9_\-]*?(?:token|secret|password|passwd|api[_\-]?key|api[_\-]?hash|access[_\-]?key|"
    r"private[_\-]?key|authorization|credentials?)"
)
# What every name _SECRET_NAME matches holds (lowercase): a text with none of them has no header to redact.
_SECRET_WORDS = ("token", "secret", "passw", "api", "key", "hash", "authorization", "credential")
_AUTH_SCHEME = r"(?:Bearer|Basic|Digest|Token|Bot|ApiKey|Negotiate)\s+"
_DONE = re.escape(REDACTED)  # a value redacted already (by another rule, or a first pass) is left as it is
# ``Name: value`` / ``name=value`` / ``'name': 'value'`` in free text; the auth scheme stays readable.
_HEADER = re.compile(
    rf"""(?P<head>\b{_SECRET_NAME}(?![A-Za-z0-9_\-])["']?\s*[:=]\s*)"""
    rf"""(?:(?P<q>["'])(?P<qscheme>{_AUTH_SCHEME})?[^"'\r\n]*(?P=q)"""
    rf"""|(?!(?:{_AUTH_SCHEME})?{_DONE})(?P<scheme>{_AUTH_SCHEME})?[^\s"',;&)\]}}]+)""",
    re.IGNORECASE,
)
# A cookie header's value is a list of pairs: all of it goes, up to the end of the line.
_COOKIE = re.compile(
    r"""(?P<head>\b(?:set-)?cookie["']?\s*[:=]\s*)(?:(?P<q>["'])[^"'\r\n]*(?P=q)|[^"'\r\n]+)""", re.IGNORECASE
)
# A URL (absolute, or a path as in a request line) and its query: the pairs' values go, the rest stays.
_URL_QUERY = re.compile(
    r"""(?P<head>(?:\b[A-Za-z][A-Za-z0-9+.\-]*://|(?<![\w/.:\-])/)[^\s?#"'<>]*)\?(?P<query>[^\s#"'<>]+)"""
)
_QUERY_PAIR = re.compile(r"(?P<name>[^&;=]*)(?P<eq>=?)(?P<value>[^&;]*)")
# ``scheme://user:password@host``: the password goes.
_USERINFO = re.compile(r"""(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:"'<>]*):[^\s/?#@"'<>]+@""")
# What ``ProcessorFormatter`` adds for itself and removes before rendering (the record is never rendered).
_FORMATTER_META = frozenset({"_record", "_from_structlog"})

_remembered: set[str] = set()
_remembered_pattern: re.Pattern[str] | None = None
_remember_lock = threading.Lock()


def remember(value: str) -> None:
    """From now on, ``value`` (a secret read from the environment, say) is redacted wherever it appears, also
    percent-encoded (in a URL) or JSON-escaped (in a server's own JSON)."""
    global _remembered_pattern
    forms = {value, quote(value, safe=""), json.dumps(value)[1:-1]}
    fresh = {form for form in forms if len(form) >= REMEMBER_MIN_CHARS} - _remembered
    if not fresh:
        return
    with _remember_lock:
        _remembered.update(fresh)
        # Longest first: a value that contains another is replaced whole.
        alternatives = sorted(_remembered, key=len, reverse=True)
        _remembered_pattern = re.compile("|".join(map(re.escape, alternatives)))


def forget_remembered() -> None:
    """Drop every remembered value (tests; a process never needs to)."""
    global _remembered_pattern
    with _remember_lock:
        _remembered.clear()
        _remembered_pattern = None


def _header_value(match: re.Match[str]) -> str:
    quote_char = match["q"] or ""
    scheme = match["qscheme"] or match["scheme"] or ""
    return f"{match['head']}{quote_char}{scheme}{REDACTED}{quote_char}"


def _query_pair(match: re.Match[str]) -> str:
    if not match.group(0):
        return ""
    if not match["eq"]:  # a bare value (``?SECRET``) is a value too
        return REDACTED
    return f"{match['name']}={REDACTED}"


def _url_query(match: re.Match[str]) -> str:
    return f"{match['head']}?{_QUERY_PAIR.sub(_query_pair, match['query'])}"


def redact_text(text: str) -> str:
    pattern = _remembered_pattern  # read once: another thread may swap it in
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    for secret in SECRET_PATTERNS:
        text = secret.sub(REDACTED, text)
    if "://" in text or "?" in text:
        text = _USERINFO.sub(rf"\g<head>:{REDACTED}@", text)
        text = _URL_QUERY.sub(_url_query, text)
    lowered = text.lower()  # the shape rules cost a scan each: only where one of their words is
    if "cookie" in lowered:
        text = _COOKIE.sub(rf"\g<head>{REDACTED}", text)
    if any(word in lowered for word in _SECRET_WORDS):
        text = _HEADER.sub(_header_value, text)
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
        return {redact_text(k) if isinstance(k, str) else k: redact_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value("", v) for v in value)
    if isinstance(value, BaseException):
        return redact_text(f"{type(value).__name__}: {value}")
    if value is None or isinstance(value, bool | int | float):
        return value
    # Any other object (an httpx URL, a request) is rendered by its repr or str: when either carries a
    # secret, the redacted text stands in for the object.
    for shown in (repr(value), str(value)):
        if redact_text(shown) != shown:
            return redact_text(str(value))
    return value


def redact_event(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> dict[str, Any]:
    """A structlog processor: every field, and the rendered exception text, are redacted."""
    return {key: value if key in _FORMATTER_META else redact_value(key, value) for key, value in event_dict.items()}
