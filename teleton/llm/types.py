"""What every provider and every caller of the model share: the request, the response in the Anthropic
message format (the one format spoken above ``teleton.llm``), usage figures and the errors.

A provider module translates between these and its SDK; the client (``teleton.llm.client``) retries what a
provider marks ``TransientError`` and hands everything else to its caller.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from teleton.llm.progress import Progress

Block = dict[str, Any]
Message = dict[str, Any]


def sendable(message: Message) -> Message:
    """``message`` as a model is sent it: without Teleton's own keys (``_``-prefixed: a session message's
    archive row), which no API accepts."""
    if not any(key.startswith("_") for key in message):
        return message
    return {key: value for key, value in message.items() if not key.startswith("_")}


@dataclass(frozen=True)
class Request:
    """One model call as Teleton asks it, in the Anthropic format (system blocks, content blocks, tools)."""

    model: str
    system: Sequence[Block] | str
    messages: Sequence[Message]
    max_tokens: int
    temperature: float | None = None
    tools: Sequence[Block] = ()
    tool_choice: dict[str, str] | None = None
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0


@dataclass
class Usage:
    """Token figures as the API reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read for this request: what decides how full the context window is."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens


@dataclass
class LLMResponse:
    content: list[Block]
    stop_reason: str | None
    usage: Usage
    model: str = ""
    # tool_use id -> why its input could not be read (malformed JSON from an OpenAI-compatible model): the
    # tool loop answers such a call with an error instead of running it, so the model can try again.
    invalid_inputs: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.content if b["type"] == "text" and b["text"]).strip()

    @property
    def tool_uses(self) -> list[Block]:
        return [b for b in self.content if b["type"] == "tool_use"]


class LLMError(Exception):
    """The model could not be reached or refused the request; the turn cannot get an answer."""

    def __init__(self, message: str, *, status: int | None = None, unreachable: bool = False) -> None:
        super().__init__(message)
        self.status = status  # the API's HTTP status when it answered (401: the key was rejected)
        self.unreachable = unreachable  # no answer at all: no connection, or none within the timeout
        self.provider: str | None = None  # the route (a preset's name) that failed, set by the client
        self.url: str | None = None  # where an unreachable request went (no query: it may carry a key)

    @property
    def key_rejected(self) -> bool:
        return self.status in (401, 403)


class ContextOverflowError(LLMError):
    """The request does not fit the model's context window."""


@dataclass
class TransientError(Exception):
    """A failure worth retrying (429, 5xx, 529, a timeout, a dropped connection, a malformed 200), as a
    provider saw it."""

    reason: str
    retry_after_s: float | None = None  # what the server asked for, when it said
    unreachable: bool = False  # no answer at all (connection refused, timeout)
    status: int | None = field(default=None)
    body: str | None = None  # the start of a malformed answer's body, for the retry's log line only

    def __post_init__(self) -> None:
        super().__init__(self.reason)

    def __str__(self) -> str:
        return self.reason


EXCERPT_CHARS = 200


def malformed(why: str, body: object) -> TransientError:
    """A 200 whose body is not the API's answer (cut short, HTML from a proxy, JSON of another shape): a
    passing fault of the server or the way to it, retried like a 5xx. ``body``: the raw text, or what the SDK
    made of it (the SDKs' models give back what arrived with ``to_dict``, quietly: it is known not to fit)."""
    to_dict = getattr(body, "to_dict", None)
    if callable(to_dict):
        body = to_dict(warnings=False)
    text = body if isinstance(body, str) else json.dumps(body, default=str, ensure_ascii=False)
    return TransientError(f"malformed answer: {why}", body=text[:EXCERPT_CHARS])


# Request timeout, conflict, rate limit; every 5xx (529 "overloaded" included) is retried as well.
RETRYABLE = frozenset({408, 409, 429})


def is_retryable(status: int) -> bool:
    return status in RETRYABLE or status >= 500


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms`` or ``retry-after``); None for none or a date."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue  # an HTTP date: fall back to our own backoff
    return None


def status_error(status: int, message: str, headers: Any) -> LLMError | TransientError:
    """What an API's error answer is for the client, whichever provider got it: retried (``RETRYABLE``,
    every 5xx) after what the server asked, or final."""
    if not is_retryable(status):
        return LLMError(f"API error {status}: {message}", status=status)
    return TransientError(f"{status} {message}", retry_after_s=retry_after(headers), status=status)


class Provider(Protocol):
    """One model API behind Teleton's format: sends a request, answers in the Anthropic format, raises
    ``TransientError`` for what is worth retrying, ``ContextOverflowError`` or ``LLMError`` otherwise."""

    name: str

    async def send(self, request: Request, progress: Progress | None = None) -> LLMResponse: ...

    async def close(self) -> None: ...
