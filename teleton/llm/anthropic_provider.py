"""The Anthropic Messages API: Teleton's own format, so nothing is translated but the SDK's objects.

Prompt caching (``cache_control`` on system blocks and messages) goes through as the caller set it; usage
comes back with its cache figures; a "prompt is too long" answer is ``ContextOverflowError``; a 200 that is not a
message (cut short, or JSON of another shape) is a ``TransientError``. The SDK's own retries are off
(``max_retries=0``): the client retries, the same way for every provider.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from teleton.llm.progress import Progress
from teleton.llm.types import (
    Block,
    ContextOverflowError,
    LLMResponse,
    Request,
    TransientError,
    Usage,
    malformed,
    status_error,
)


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: anthropic.Timeout | None = None,
        sdk: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        self._sdk = sdk or anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)

    async def close(self) -> None:
        await self._sdk.close()

    async def send(self, request: Request, progress: Progress | None = None) -> LLMResponse:
        """One request, streamed to ``progress`` when given; its failure mapped to what the client does."""
        kwargs = _kwargs(request)
        try:
            if progress is None:
                message = await self._sdk.messages.create(**kwargs)
            else:
                async with self._sdk.messages.stream(**kwargs) as stream:
                    async for piece in stream.text_stream:
                        progress.text(piece)
                    message = await stream.get_final_message()
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as exc:
            raise _mapped(exc) from exc
        except json.JSONDecodeError as exc:  # the SDK parses the body as it came: a cut one fails here
            raise malformed(f"invalid JSON ({exc.msg} at char {exc.pos})", exc.doc) from exc
        return _to_response(message)


def _kwargs(request: Request) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": request.system if isinstance(request.system, str) else list(request.system),
        "messages": list(request.messages),
        "timeout": anthropic.Timeout(request.timeout_s, connect=min(request.connect_timeout_s, request.timeout_s)),
    }
    # This SDK release has no ``temperature`` argument; the API still takes it, so it rides in the body.
    if request.temperature is not None:
        kwargs["extra_body"] = {"temperature": request.temperature}
    if request.tools:
        kwargs["tools"] = list(request.tools)
        if request.tool_choice:
            kwargs["tool_choice"] = request.tool_choice
    return kwargs


def _mapped(exc: anthropic.APIStatusError | anthropic.APIConnectionError) -> Exception:
    if isinstance(exc, anthropic.APIConnectionError):  # timeouts included
        return TransientError(type(exc).__name__, unreachable=True)
    status = exc.status_code
    if isinstance(exc, anthropic.BadRequestError) and _is_overflow(exc):
        return ContextOverflowError(str(exc))
    return status_error(status, _message_of(exc), exc.response.headers)


def _to_response(message: Any) -> LLMResponse:
    # The SDK builds its objects without validating them: a body of another shape arrives as a Message of
    # Nones (or as the string or list it was), and must not pass for an empty answer.
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        raise malformed("no content list", message)
    blocks: list[Block] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text" and isinstance(block.text, str):
            blocks.append({"type": "text", "text": block.text})
        elif kind == "tool_use" and isinstance(block.input, dict) and _strings(block.id, block.name):
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        elif kind in ("text", "tool_use") or not isinstance(kind, str):
            raise malformed(f"a content block of no known shape ({kind or 'no type'})", message)
        # Other block kinds (thinking, server tools) are not used by Teleton and not replayed.
    usage = message.usage
    return LLMResponse(
        content=blocks,
        stop_reason=message.stop_reason,
        usage=Usage(
            input_tokens=getattr(usage, "input_tokens", 0) or 0,
            output_tokens=getattr(usage, "output_tokens", 0) or 0,
            cache_read_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
            cache_write_tokens=getattr(usage, "cache_creation_input_tokens", 0) or 0,
        ),
        model=message.model or "",
    )


def _strings(*values: Any) -> bool:
    return all(isinstance(value, str) for value in values)


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
