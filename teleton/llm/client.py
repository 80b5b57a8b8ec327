"""The one place Teleton talks to a language model, whichever provider serves it.

The provider modules (``anthropic_provider``, ``openai_provider``) translate one request to their API and back;
this client owns what is the same for all of them: settings, retries, and the errors its callers see. The SDKs'
own retries are switched off and done here instead (tenacity), so that every retry is logged, the delays are
configurable (tests run a 529 storm in milliseconds) and a ``retry-after`` from the server is honoured up to a
cap. Retried: 429, 500-class (529 "overloaded" included), timeouts, dropped connections and malformed 200s (a
body cut short or of another shape: its first characters are logged). An answer saying the prompt does not fit
becomes ``ContextOverflowError`` so the runtime can compact and try once more. While a call retries,
``watch`` says since when and why (``teleton status``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog
from tenacity import RetryCallState

from teleton.llm.failover import Failover, Route, failover_reason
from teleton.llm.prices import Price
from teleton.llm.progress import Progress
from teleton.llm.retry_watch import RetryWatch
from teleton.llm.types import (
    RETRYABLE,
    Block,
    ContextOverflowError,
    LLMError,
    LLMResponse,
    Message,
    Provider,
    Request,
    TransientError,
    Usage,
    sendable,
)
from teleton.process.retries import Wait, failure, retrying, waits

__all__ = [
    "RETRYABLE",
    "Block",
    "ContextOverflowError",
    "LLMClient",
    "LLMError",
    "LLMResponse",
    "LLMSettings",
    "Message",
    "Usage",
]

log = structlog.get_logger(__name__)


def _unavailable(exc: TransientError, tries: int) -> LLMError:
    error = LLMError(f"model unavailable after {tries} attempts: {exc}", unreachable=exc.unreachable)
    error.url = url_tried(exc.__cause__) if exc.unreachable else None
    return error


def url_tried(exc: BaseException | None) -> str | None:
    """The URL an SDK's connection error was for: scheme, host, port and path; never a query or a user."""
    while exc is not None:
        try:
            url = exc.request.url  # type: ignore[attr-defined]  # the SDKs' and httpx's connection errors
        except (AttributeError, RuntimeError):  # httpx raises RuntimeError for a request it was not given
            exc = exc.__cause__
            continue
        port = f":{url.port}" if url.port else ""
        return f"{url.scheme}://{url.host}{port}{url.path}"
    return None


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


def _backoff(base_s: float, max_s: float) -> Wait:
    """The server's retry-after (at most ``max_s``) when it sent one, else the jittered back-off."""

    def asked(error: BaseException) -> float | None:
        after = error.retry_after_s if isinstance(error, TransientError) else None
        return None if after is None else min(after, max_s)

    return waits(base_s=base_s, max_s=max_s, jitter_s=base_s, told=asked)


def anthropic_provider(settings: LLMSettings, api_key: str | None, base_url: str | None) -> Provider:
    """The Messages API with the request timeout; a black-holed address fails on the connect timeout."""
    import anthropic  # deferred: the SDK takes ~1 s to import; an OpenAI-compatible setup never loads it

    from teleton.llm.anthropic_provider import AnthropicProvider  # deferred: imports the anthropic SDK (above)

    connect = min(settings.connect_timeout_s, settings.request_timeout_s)
    timeout = anthropic.Timeout(settings.request_timeout_s, connect=connect)
    return AnthropicProvider(api_key=api_key, base_url=base_url, timeout=timeout)


class LLMClient:
    """The main model's provider (Anthropic unless told) and its fallbacks, the utility model's provider, with
    Teleton's retries, failover and error mapping. Requests on ``settings.utility_model`` go to the utility
    provider when one is set: the callers (distiller, compaction) name the model, the client picks the route."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        provider: Provider | None = None,
        name: str = "anthropic",
        fallbacks: Sequence[Route] = (),
        utility: Route | None = None,
        failover_retry_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        price: Price | None = None,
    ) -> None:
        self.settings = settings
        self.provider = provider or anthropic_provider(settings, api_key, base_url)
        self.failover = Failover([Route(name, self.provider), *fallbacks], retry_s=failover_retry_s, clock=clock)
        self.utility = utility  # None: the utility model runs on the main chain
        self.price = price  # the main model's, for /status spend; None: unknown
        self.retries = 0  # total retries since start, for /status and logs
        self.watch = RetryWatch()  # the calls retrying now, for `teleton status`

    async def close(self) -> None:
        providers = [r.provider for r in self.failover.routes] + ([self.utility.provider] if self.utility else [])
        for provider in providers:
            await provider.close()

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
        """One model call, retried on transient failures, then failed over; streamed to ``progress`` when given."""
        s = self.settings
        request = Request(
            model=model or s.model,
            system=system,
            messages=[sendable(m) for m in messages],
            max_tokens=max_tokens or s.max_tokens,
            temperature=s.temperature if temperature is None else temperature,
            tools=list(tools),
            tool_choice=tool_choice if tools else None,
            timeout_s=s.request_timeout_s,
            connect_timeout_s=s.connect_timeout_s,
        )
        if self.utility is not None and model is not None and model == s.utility_model:
            try:
                return await self._send(self.utility.provider, request, progress, s.max_retries)
            except TransientError as exc:
                raise _unavailable(exc, s.max_retries + 1) from exc.__cause__
        last: TransientError | None = None
        for attempt in self.failover.plan():
            route = self.failover.routes[attempt.index]
            routed = replace(request, model=route.model) if route.model else request
            retries = 0 if attempt.probe else s.max_retries
            try:
                response = await self._send(route.provider, routed, progress, retries)
            except TransientError as exc:
                self.failover.failed(attempt.index)
                log.warning("llm_route_failed", route=route.name, probe=attempt.probe, reason=str(exc))
                last = exc
                continue
            except LLMError as exc:
                exc.provider = exc.provider or route.name  # whose key was rejected, for the apology
                raise
            self.failover.answered(attempt.index, failover_reason(last) if last else "")
            return response
        assert last is not None  # the plan always holds the current route
        raise _unavailable(last, s.max_retries + 1) from last.__cause__

    async def _send(self, provider: Provider, request: Request, progress: Progress | None, retries: int) -> LLMResponse:
        """One request to one provider, retried ``retries`` times on transient failures."""

        sequence = object()  # this call's retries, for the watch

        def retrying_log(state: RetryCallState) -> None:
            self.retries += 1
            wait = state.next_action.sleep if state.next_action else 0.0
            error = failure(state)
            reason = str(error) if error else ""
            body = {"body": error.body} if isinstance(error, TransientError) and error.body is not None else {}
            log.warning("llm_retry", attempt=state.attempt_number, wait_s=round(wait, 3), reason=reason, **body)
            self.watch.retrying(sequence, reason)
            if progress is not None:
                progress.retry(state.attempt_number, wait, reason)

        s = self.settings
        attempts = retrying(
            lambda error: isinstance(error, TransientError),
            _backoff(s.retry_base_delay_s, s.retry_max_delay_s),
            attempts=retries + 1,
            on_retry=retrying_log,
        )
        try:
            async for attempt in attempts:
                with attempt:
                    response = await provider.send(request, progress)
        finally:
            self.watch.ended(sequence)
        return response

    @property
    def utility_sees_images(self) -> bool:
        """Whether the utility model's provider is sent images (a provider without vision gets a note)."""
        provider = self.utility.provider if self.utility is not None else self.provider
        return bool(getattr(provider, "vision", True))

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
