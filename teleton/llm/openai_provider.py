"""OpenAI-compatible chat completions (OpenAI, OpenRouter, Groq, Gemini, Ollama, vLLM, ...) behind Teleton's
Anthropic-format messages, on the official ``openai`` SDK.

Everything above ``teleton.llm`` speaks the Anthropic format, so the translation lives here and only here: system
blocks become one system message (``cache_control`` dropped), ``tool_use`` ``tool_calls``, ``tool_result``
``role: tool`` messages, images data URLs; a 200 that is not a completion is a ``TransientError``. With
``progress`` the request streams (``teleton.llm.openai_stream`` puts it back together); a server that cannot
stream is asked once more in one piece and never again (docs/models.md, "Streaming").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import openai
import structlog
from openai.types.chat import ChatCompletionStreamOptionsParam

from teleton.llm.openai_stream import StreamRefused, assemble
from teleton.llm.progress import Progress
from teleton.llm.types import (
    Block,
    ContextOverflowError,
    LLMError,
    LLMResponse,
    Message,
    Request,
    TransientError,
    Usage,
    malformed,
    status_error,
)
from teleton.text.tokens import estimate_tokens

Chat = dict[str, Any]
log = structlog.get_logger(__name__)

# Local servers take any key but the SDK refuses to start without one.
NO_KEY = "no-key-needed"
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}
NO_IMAGE = "[an image was attached here; this model cannot see images]"
OVERFLOW_WORDS = ("context length", "context window", "maximum context", "too many tokens", "prompt is too long")


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None,
        vision: bool = True,
        max_tokens_field: str = "max_tokens",
        cache_prompt: bool = False,
        sdk: openai.AsyncOpenAI | None = None,
    ) -> None:
        self._sdk = sdk or openai.AsyncOpenAI(api_key=api_key or NO_KEY, base_url=base_url, max_retries=0)
        self.vision = vision
        # OpenAI's own newer models refuse ``max_tokens``; most compatible servers know only that name.
        self.max_tokens_field = max_tokens_field
        self.cache_prompt = cache_prompt  # llama.cpp: keep the prompt's KV cache for the next request
        self.streams = True  # False once the server showed it cannot stream (then every request is whole)
        self.stream_usage = True  # ask for the usage chunk; False once the server refused ``stream_options``

    async def close(self) -> None:
        await self._sdk.close()

    async def send(self, request: Request, progress: Progress | None = None) -> LLMResponse:
        out = _outgoing(request, self.vision, self.max_tokens_field)
        if self.cache_prompt:
            out.body["cache_prompt"] = True
        if progress is not None and self.streams:
            try:
                return await self._streamed(out, request, progress)
            except StreamRefused as refused:
                self._stop_streaming(str(refused))
        response = await self._whole(out, request)
        if progress is not None and response.text:
            progress.text(response.text)
        return response

    async def _whole(self, out: Outgoing, request: Request) -> LLMResponse:
        try:
            completion = await self._sdk.chat.completions.create(
                model=out.model, messages=[], extra_body=out.body, timeout=out.timeout
            )
        except (openai.APIStatusError, openai.APIConnectionError) as exc:
            raise _mapped(exc, request.model) from exc
        except json.JSONDecodeError as exc:  # the SDK parses the body as it came: a cut one fails here
            raise malformed(f"invalid JSON ({exc.msg} at char {exc.pos})", exc.doc) from exc
        # The SDK builds its objects without validating them; ``to_dict`` is what arrived (a proxy's HTML page
        # arrives as the string it was).
        dumped = completion.to_dict(warnings=False) if hasattr(completion, "to_dict") else completion
        return to_response(dumped, request)

    async def _streamed(self, out: Outgoing, request: Request, progress: Progress) -> LLMResponse:
        """The request streamed to ``progress``; ``StreamRefused`` when the server does not stream it."""
        usage: ChatCompletionStreamOptionsParam | None = {"include_usage": True} if self.stream_usage else None
        try:
            stream = await self._sdk.chat.completions.create(
                model=out.model, messages=[], extra_body=out.body, timeout=out.timeout, stream=True,
                stream_options=usage,
            )  # fmt: skip
            async with stream:
                if "event-stream" not in stream.response.headers.get("content-type", ""):
                    return self._answered_whole(json.loads(await stream.response.aread()), request, progress)
                assembly = await assemble(stream, progress.text)
        except openai.APIStatusError as exc:
            if _about_streaming(exc) and self.stream_usage and "stream_options" in _message_of(exc):
                self.stream_usage = False  # an older server: stream without the usage chunk (usage estimated)
                return await self._streamed(out, request, progress)
            if _about_streaming(exc):
                raise StreamRefused(f"API error {exc.status_code}: {_message_of(exc)}") from exc
            raise _mapped(exc, request.model) from exc
        except openai.APIConnectionError as exc:  # a stream cut by a dropped connection or a timeout included
            raise _mapped(exc, request.model) from exc
        except openai.APIError as exc:  # an error event inside the stream: the server failed half-way
            raise TransientError(f"stream error: {exc.message}") from exc
        except json.JSONDecodeError as exc:
            raise malformed(f"invalid JSON in the stream ({exc.msg} at char {exc.pos})", exc.doc) from exc
        return to_response(assembly.completion(requested_tools=bool(request.tools)), request)

    def _answered_whole(self, completion: object, request: Request, progress: Progress) -> LLMResponse:
        """A server that ignored ``stream`` and sent one completion: used as it is, and not asked to stream again."""
        response = to_response(completion, request)  # a malformed body is retried, streaming left on
        self._stop_streaming("the server answers streamed requests in one piece")
        if response.text:
            progress.text(response.text)
        return response

    def _stop_streaming(self, reason: str) -> None:
        self.streams = False
        log.info("stream_fallback", provider=self.name, reason=reason, then="one piece from now on")


# -- request ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing:
    model: str
    body: Chat  # everything else, sent as ``extra_body``
    timeout: openai.Timeout


def _outgoing(request: Request, vision: bool, max_tokens_field: str) -> Outgoing:
    body = to_chat_request(request, vision=vision, max_tokens_field=max_tokens_field)
    # The SDK transforms typed params key by key on the event loop before sending: with memory and 35 tools that
    # doubled the turn's overhead (bench_turn DM p95 104.5 -> 51.3 ms). ``extra_body`` is sent as it is and wins
    # over the placeholder ``messages``.
    timeout = openai.Timeout(request.timeout_s, connect=min(request.connect_timeout_s, request.timeout_s))
    return Outgoing(model=body.pop("model"), body=body, timeout=timeout)


def to_chat_request(request: Request, *, vision: bool = True, max_tokens_field: str = "max_tokens") -> Chat:
    body: Chat = {
        "model": request.model,
        "messages": to_chat_messages(request.system, request.messages, vision=vision),
        max_tokens_field: request.max_tokens,
    }
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.tools:
        body["tools"] = [to_chat_tool(tool) for tool in request.tools]
        if request.tool_choice:
            body["tool_choice"] = to_tool_choice(request.tool_choice)
    return body


def to_chat_tool(tool: Block) -> Chat:
    function = {"name": tool["name"], "description": tool.get("description", ""), "parameters": tool["input_schema"]}
    return {"type": "function", "function": function}


def to_tool_choice(choice: dict[str, str]) -> Any:
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice["name"]}}
    return {"any": "required", "none": "none"}.get(kind or "", "auto")


def to_chat_messages(system: Sequence[Block] | str, messages: Sequence[Message], *, vision: bool = True) -> list[Chat]:
    chat: list[Chat] = []
    system_text = system if isinstance(system, str) else "\n\n".join(b.get("text", "") for b in system)
    if system_text:
        chat.append({"role": "system", "content": system_text})
    for message in messages:
        if message["role"] == "assistant":
            chat.append(_assistant(message["content"]))
        else:
            chat.extend(_user(message["content"], vision))
    return chat


def _assistant(content: str | list[Block]) -> Chat:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    text = "\n".join(b["text"] for b in content if b["type"] == "text" and b.get("text"))
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})},
        }
        for b in content
        if b["type"] == "tool_use"
    ]
    out: Chat = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return out


def _user(content: str | list[Block], vision: bool) -> list[Chat]:
    """A user turn: its tool results first (each a ``role: tool`` message, right after the assistant's
    ``tool_calls`` as the API demands), then whatever else it carries as one user message."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[Chat] = []
    parts: list[Chat] = []
    for block in content:
        if block["type"] == "tool_result":
            text, images = _result_parts(block.get("content", ""), vision)
            prefix = "Error: " if block.get("is_error") else ""
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": prefix + text})
            parts.extend(images)  # a tool message holds text only: its images follow as the user's
        elif block["type"] == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif block["type"] == "image":
            parts.append(_image(block, vision))
    if parts:
        out.append({"role": "user", "content": _plain(parts)})
    return out


def _result_parts(content: str | list[Block], vision: bool) -> tuple[str, list[Chat]]:
    if isinstance(content, str):
        return content, []
    text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    images = [_image(b, vision) for b in content if b.get("type") == "image"]
    return text, images


def _image(block: Block, vision: bool) -> Chat:
    if not vision:
        return {"type": "text", "text": NO_IMAGE}
    source = block.get("source", {})
    if source.get("type") == "url":
        url = source["url"]
    else:
        url = f"data:{source.get('media_type', 'image/jpeg')};base64,{source.get('data', '')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _plain(parts: list[Chat]) -> str | list[Chat]:
    # Text-only content goes as a string: some local servers accept nothing else.
    if all(p["type"] == "text" for p in parts):
        return "\n\n".join(p["text"] for p in parts)
    return parts


# -- response --------------------------------------------------------------------------------------------


def to_response(completion: object, request: Request) -> LLMResponse:
    """The answer in Teleton's format from what arrived (any JSON); a body that is no completion (no
    ``choices[0].message`` object) is ``TransientError``, never an empty answer."""
    body: dict[str, Any] = completion if isinstance(completion, dict) else {}
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    problem = _shape_problem(message)
    if problem:
        raise malformed(problem, completion)
    assert isinstance(message, dict)
    blocks: list[Block] = []
    text = _text_of(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    invalid: dict[str, str] = {}
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments, problem = parse_arguments(function.get("arguments"))
        blocks.append({"type": "tool_use", "id": call["id"], "name": function.get("name", ""), "input": arguments})
        if problem:
            invalid[call["id"]] = problem
    stop = STOP_REASONS.get(choice.get("finish_reason") or "", choice.get("finish_reason"))
    if message.get("tool_calls"):
        stop = "tool_use"  # some servers say "stop" while asking for tools
    return LLMResponse(
        content=blocks,
        stop_reason=stop,
        usage=to_usage(body.get("usage"), request, blocks),
        model=body.get("model") or request.model,
        invalid_inputs=invalid,
    )


def _shape_problem(message: Any) -> str | None:
    """What keeps ``message`` from being a chat completion's message, or None."""
    if not isinstance(message, dict):
        return "no choices[0].message object"
    if _text_of(message.get("content")) is None and message.get("content") is not None:
        return "message content is not text"
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in calls):
        return "tool_calls of no known shape"
    return None


def _text_of(content: Any) -> str | None:
    """A message's text: a string, or a list of text parts (some servers answer so); None for neither."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return "".join(str(p.get("text") or "") for p in content if p.get("type") == "text")
    return None


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as a dict, or ``{}`` and what was wrong (told to the model as a tool error)."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        return {}, f"the arguments were not valid JSON ({exc}): {str(raw)[:200]!r}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def to_usage(usage: Chat | None, request: Request, blocks: list[Block]) -> Usage:
    """Usage in Anthropic's terms (input excludes cache reads); estimated when the server sent none."""
    usage = usage or {}
    prompt = usage.get("prompt_tokens")
    if not prompt:
        prompt = estimate_tokens([request.system, list(request.messages), list(request.tools)])
    completion = usage.get("completion_tokens") or estimate_tokens(blocks)
    details = usage.get("prompt_tokens_details") or {}
    cached = min(details.get("cached_tokens") or 0, prompt)
    return Usage(input_tokens=prompt - cached, output_tokens=completion, cache_read_tokens=cached)


# -- errors ----------------------------------------------------------------------------------------------


def _mapped(exc: openai.APIStatusError | openai.APIConnectionError, model: str) -> Exception:
    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return TransientError(type(exc).__name__, unreachable=True)
    status = exc.status_code
    message = _message_of(exc)
    lowered = message.lower()
    if getattr(exc, "code", None) == "context_length_exceeded" or (
        status in (400, 413) and any(word in lowered for word in OVERFLOW_WORDS)
    ):
        return ContextOverflowError(message)
    if status == 400 and "does not support tools" in lowered:
        return LLMError(f"model {model} has no tool calling ({message}): choose a model with tools", status=status)
    return status_error(status, message, exc.response.headers)


def _about_streaming(exc: openai.APIStatusError) -> bool:
    """A refusal of the streamed form (llama.cpp: "Cannot use tools with stream"), not of the request."""
    return exc.status_code in (400, 422, 501) and "stream" in _message_of(exc).lower()


def _message_of(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(exc)
