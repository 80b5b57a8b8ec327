"""The one place Teleton talks to the Anthropic Messages API.

The SDK's own retries are switched off (``max_retries=0``) and done here instead (tenacity), so that every
retry is logged, the delays are configurable (tests run a 529 storm in milliseconds) and a ``retry-after`` from the
server is honoured up to a cap. Retried: 429, 500-class (529 "overloaded" included), timeouts and dropped
connections. A "prompt is too long" answer becomes ``ContextOverflowError`` so the runtime can compact
and try once more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anthropic
import structlog
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from teleton.llm.progress import Progress

log = structlog.get_logger(__name__)

Block = dict[str, Any]
# Request timeout, conflict, rate limit; every 5xx (529 "overloaded" included) is retried as well.
RETRYABLE = frozenset({408, 409, 429})
Message = dict[str, Any]


@dataclass(frozen=True)
class LLMSettings:
    model: str = "claude-sonnet-4-5"
    utility_model: str = "claude-haiku-4-5"
    max_tokens: int = 4096
    temperature: float | None = 0.7
    request_timeout_s: float = 120.0
    connect_timeout_s: float = 10.0  # a black-holed address fails in seconds, not after the request timeout
    max_retries: int = 6
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 60.0

    @property
    def timeout(self) -> anthropic.Timeout:
        return anthropic.Timeout(self.request_timeout_s, connect=min(self.connect_timeout_s, self.request_timeout_s))

    @classmethod
    def from_config(cls, agent: Any, **overrides: Any) -> LLMSettings:
        """From ``config.agent`` (teleton.config.schema.AgentConfig)."""
        values = {
            "model": agent.model,
            "utility_model": agent.utility_model,
            "max_tokens": agent.max_tokens,
            "temperature": agent.temperature,
            "request_timeout_s": agent.request_timeout_s,
            "max_retries": agent.max_retries,
            "retry_max_delay_s": agent.retry_max_delay_s,
        }
        values.update(overrides)
        return cls(**values)


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

    @property
    def key_rejected(self) -> bool:
        return self.status in (401, 403)


class ContextOverflowError(LLMError):
    """The request does not fit the model's context window."""


class _Transient(Exception):
    """A failure worth retrying (429, 5xx, 529, a dropped connection); carries the SDK's exception."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(_describe(cause))
        self.cause = cause


def _backoff(base_s: float, max_s: float) -> Callable[[RetryCallState], float]:
    """Exponential backoff with full jitter, or the server's retry-after when it sent one."""
    jittered = wait_random_exponential(multiplier=base_s, max=max_s)

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        retry_after = _retry_after(error.cause) if isinstance(error, _Transient) else None
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, max_s)
        return float(jittered(state))

    return wait


class LLMClient:
    """``AsyncAnthropic`` with Teleton's retries, usage accounting and error mapping."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        sdk: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        self.settings = settings
        self._sdk = sdk or anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=settings.timeout
        )
        self.retries = 0  # total retries since start, for /status and logs

    async def close(self) -> None:
        await self._sdk.close()

    async def create(
        self,
        *,
        system: Sequence[Block] | str,
        messages: Sequence[Message],
        tools: Sequence[Block] = (),
        model: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tool_choice: dict[str, str] | None = None,
        progress: Progress | None = None,
    ) -> LLMResponse:
        """One Messages API call, retried on transient failures; streamed to ``progress`` when given."""
        kwargs: dict[str, Any] = {
            "model": model or self.settings.model,
            "max_tokens": max_tokens or self.settings.max_tokens,
            "system": system if isinstance(system, str) else list(system),
            "messages": list(messages),
            "timeout": self.settings.timeout,
        }
        # This SDK release has no ``temperature`` argument; the API still takes it, so it rides in the body.
        temp = self.settings.temperature if temperature is None else temperature
        if temp is not None:
            kwargs["extra_body"] = {"temperature": temp}
        if tools:
            kwargs["tools"] = list(tools)
            if tool_choice:
                kwargs["tool_choice"] = tool_choice

        def retrying_log(state: RetryCallState) -> None:
            self.retries += 1
            wait = state.next_action.sleep if state.next_action else 0.0
            reason = str(state.outcome.exception()) if state.outcome else ""
            log.warning("llm_retry", attempt=state.attempt_number, wait_s=round(wait, 3), reason=reason)
            if progress is not None:
                progress.retry(state.attempt_number, wait, reason)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=_backoff(self.settings.retry_base_delay_s, self.settings.retry_max_delay_s),
            retry=retry_if_exception_type(_Transient),
            before_sleep=retrying_log,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    message = await self._call(kwargs, progress)
        except _Transient as exc:
            tries = self.settings.max_retries + 1
            unreachable = isinstance(exc.cause, anthropic.APIConnectionError)  # timeouts included
            raise LLMError(f"model unavailable after {tries} attempts: {exc}", unreachable=unreachable) from exc.cause
        return _to_response(message)

    async def _call(self, kwargs: dict[str, Any], progress: Progress | None = None) -> Any:
        """One request; its failure mapped to what the caller does with it (retry, compact, give up)."""
        try:
            if progress is None:
                return await self._sdk.messages.create(**kwargs)
            async with self._sdk.messages.stream(**kwargs) as stream:
                async for piece in stream.text_stream:
                    progress.text(piece)
                return await stream.get_final_message()
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(exc, anthropic.BadRequestError) and _is_overflow(exc):
                raise ContextOverflowError(str(exc)) from exc
            if status is not None and status not in RETRYABLE and status < 500:
                raise LLMError(f"API error {status}: {_message_of(exc)}", status=status) from exc
            raise _Transient(exc) from exc

    async def complete(self, prompt: str, *, system: str = "", max_tokens: int = 1024) -> str:
        """A one-shot text completion on the utility model (summaries, fact extraction)."""
        response = await self.create(
            system=system or "You are a precise assistant.",
            messages=[{"role": "user", "content": prompt}],
            model=self.settings.utility_model,
            max_tokens=max_tokens,
            temperature=0.2,
        )
        return response.text


def _to_response(message: Any) -> LLMResponse:
    blocks: list[Block] = []
    for block in message.content:
        if block.type == "text":
            blocks.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        # Other block kinds (thinking, server tools) are not used by Teleton and not replayed.
    usage = message.usage
    return LLMResponse(
        content=blocks,
        stop_reason=message.stop_reason,
        usage=Usage(
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            cache_read_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
            cache_write_tokens=getattr(usage, "cache_creation_input_tokens", 0) or 0,
        ),
        model=message.model,
    )


def _is_overflow(exc: anthropic.BadRequestError) -> bool:
    text = _message_of(exc).lower()
    return "prompt is too long" in text or "context window" in text or "too many tokens" in text


def _message_of(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(exc)


def _describe(exc: Exception) -> str:
    if isinstance(exc, anthropic.APIStatusError):
        return f"{exc.status_code} {_message_of(exc)}"
    return type(exc).__name__


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            continue  # an HTTP date: fall back to our own backoff
    return None
