"""A scripted OpenAI-compatible API on 127.0.0.1, for driving the real ``openai`` SDK in tests.

The server speaks the wire format of ``POST /v1/chat/completions`` (``choices[0].message`` with ``content``
and ``tool_calls``, ``finish_reason``, ``usage`` with ``prompt_tokens_details.cached_tokens``) and
``GET /v1/models``, answers errors in OpenAI's error JSON (``{"error": {message, type, param, code}}``) with
``retry-after`` when asked, sends a ``raw`` reply's bytes as they are (a malformed 200), and keeps every
request body in ``server.requests``.

Scripts are the ones of ``tests.fakes.anthropic_server`` (``queue(...)``, ``responder``, ``Reply``): a reply
written in the Anthropic vocabulary (``text(...)``, ``tool_use(...)``, ``error(...)``, ``overloaded()``) is
sent in OpenAI's format, so one scripted exchange drives either provider. ``completion(...)`` and
``oa_error(...)`` script what only this API can say (malformed tool-call arguments, ``context_length_exceeded``).
Prompt caching is emulated as OpenAI documents it, automatically (``tests.fakes.prompt_cache.AutomaticCache``:
the exact beginning of the prompt, tools then messages, from 1024 tokens in steps of 128, entries living 5
minutes from their last hit, the clock the constructor's): reported as ``cached_tokens``, each request's
figures kept in ``server.cache.log``.

A request with ``stream: true`` is answered with server-sent events as the real API streams
(``data: {chat.completion.chunk}`` ... ``data: [DONE]``): text a word at a time, each tool call as its id and
name, then its arguments JSON in pieces of a few characters, the ``finish_reason`` chunk, a usage-only chunk
when ``stream_options.include_usage``. ``tools_in_stream`` plays servers that cannot stream tool calls:
``"refuse"`` answers 400 "Cannot use tools with stream", ``"silent"`` streams nothing and no finish_reason,
``"whole"`` ignores ``stream`` and answers one JSON completion. ``cut(reply, after)`` drops the connection after
``after`` chunks; ``halted`` (``pause``) holds a streamed text half-written.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Literal

from tests.fakes.anthropic_server import Body, Reply, text
from tests.fakes.prompt_cache import AutomaticCache
from tests.fakes.scripted import ScriptedServer

_ids = itertools.count(1)
FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "requests", 500: "server_error"}
ARGUMENT_PIECE = 5  # characters of a tool call's arguments per streamed chunk
ToolsInStream = Literal["deltas", "refuse", "silent", "whole"]


@dataclass
class Cut(Reply):
    """A streamed reply whose connection drops after ``after`` chunks (no finish_reason, no [DONE])."""

    after: int = 0


def cut(reply: Reply, after: int) -> Cut:
    return Cut(status=reply.status, body=reply.body, headers=reply.headers, after=after)


def completion(
    content: str | None = None,
    *,
    tool_calls: Iterable[tuple[str, str]] = (),
    finish_reason: str | None = None,
    usage: Body | None = None,
) -> Reply:
    """A reply in OpenAI's own format; ``tool_calls`` are (name, arguments as the raw JSON text) pairs."""
    calls = [
        {"id": f"call_{next(_ids):06d}", "type": "function", "function": {"name": name, "arguments": arguments}}
        for name, arguments in tool_calls
    ]
    message: Body = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    finish = finish_reason or ("tool_calls" if calls else "stop")
    body: Body = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return Reply(body=body)


def oa_error(
    status: int, message: str = "", *, code: str | None = None, kind: str = "", retry_after: float | None = None
) -> Reply:
    body = {"error": {"message": message or f"error {status}", "type": kind or ERROR_TYPES.get(status, "server_error"),
                      "param": None, "code": code}}  # fmt: skip
    headers = {} if retry_after is None else {"retry-after": str(retry_after)}
    return Reply(status=status, body=body, headers=headers)


def context_too_long() -> Reply:
    return oa_error(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130001 tokens.",
        code="context_length_exceeded",
    )


class FakeOpenAI(ScriptedServer[Reply]):
    """The server. Use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(lambda body: text("ok"))
        self.cache = AutomaticCache(clock=clock)
        self.tools_in_stream: ToolsInStream = "deltas"
        self.pace_s = 0.0  # between streamed chunks: a model writing at its own pace, not all at once

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.split("?")[0] == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "gpt-test", "object": "model"}]})
                else:
                    self._send(404, oa_error(404, "not found").body or {})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                fake.arrived()
                if self.path.split("?")[0] != "/v1/chat/completions":
                    self._send(404, oa_error(404, "not found").body or {})
                    return
                body = json.loads(raw)
                streamed = bool(body.get("stream"))
                with_tools = streamed and bool(body.get("tools"))
                if with_tools and fake.tools_in_stream in ("refuse", "silent"):
                    with fake._lock:  # refused before any scripted reply is used
                        fake.requests.append(body)
                    if fake.tools_in_stream == "refuse":
                        self._send(400, oa_error(400, "Cannot use tools with stream").body or {})
                    else:
                        self._stream(iter(()), Reply())
                    return
                reply = fake._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw is not None:
                    self._send(200, reply.raw)
                elif reply.status == 200 and streamed and not (with_tools and fake.tools_in_stream == "whole"):
                    usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    self._stream(_chunks(fake._completion(body, reply), reply, usage=usage), reply)
                elif reply.status == 200:
                    self._send(200, fake._completion(body, reply), reply.headers)
                else:
                    self._send(reply.status, _error_body(reply), reply.headers)

            def _send(self, status: int, payload: Body | bytes, headers: dict[str, str] | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _stream(self, chunks: Iterator[Body | None], reply: Reply) -> None:
                """Server-sent events; the end of the body ends the stream (no content-length), so a ``Cut``
                reply's stream simply stops."""
                self.close_connection = True
                limit = reply.after if isinstance(reply, Cut) else None
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for sent, chunk in enumerate(chunks):
                        if limit is not None and sent >= limit:
                            return
                        if chunk is None:
                            assert reply.pause is not None
                            reply.pause.wait()
                            continue
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                        if fake.pace_s:
                            time.sleep(fake.pace_s)
                    if limit is None:
                        self.wfile.write(b"data: [DONE]\n\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return self.serve(Handler, "fake-openai")

    def _completion(self, body: Body, reply: Reply) -> Body:
        partial = reply.body or {}
        choices = partial["choices"] if "choices" in partial else [_choice(partial)]
        usage = partial.get("usage")
        if usage is None or "input_tokens" in usage:
            usage = self._usage(body, choices, usage)
        return {
            "id": f"chatcmpl-{next(_ids):08d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "gpt-test"),
            "choices": choices,
            "usage": usage,
        }

    def _usage(self, body: Body, choices: list[Body], given: Body | None) -> Body:
        """Scripted Anthropic figures converted, or figures from the body size (about 4 characters a token)."""
        if given is not None:
            cached = given.get("cache_read_input_tokens", 0)
            prompt = given.get("input_tokens", 0) + cached
            output = given.get("output_tokens", 0)
        else:
            figures = self.cache.bill(body)
            prompt, cached = max(1, figures.tokens), figures.read
            output = max(1, len(json.dumps(choices)) // 4)
        return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output,
                "prompt_tokens_details": {"cached_tokens": cached}}  # fmt: skip


def _chunks(completion: Body, reply: Reply, *, usage: bool) -> Iterator[Body | None]:
    """One completion as the chunks of its stream; ``None`` marks where it waits for ``reply.pause``."""
    head = {key: completion[key] for key in ("id", "created", "model")}

    def chunk(delta: Body, finish: str | None = None) -> Body:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {**head, "object": "chat.completion.chunk", "choices": [choice]}

    choice = completion["choices"][0]
    message = choice["message"]
    yield chunk({"role": "assistant", "content": ""})
    written = 0
    for piece in _words(message.get("content") or ""):
        if reply.pause is not None and written <= reply.pause_at < written + len(piece):
            cut_at = reply.pause_at - written
            if cut_at:
                yield chunk({"content": piece[:cut_at]})
            yield None
            piece = piece[cut_at:]
        written += len(piece)
        yield chunk({"content": piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        first = {"index": index, "id": call["id"], "type": "function",
                 "function": {"name": function["name"], "arguments": ""}}  # fmt: skip
        yield chunk({"tool_calls": [first]})
        arguments = function["arguments"]
        for start in range(0, len(arguments), ARGUMENT_PIECE):
            piece = arguments[start : start + ARGUMENT_PIECE]
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, choice["finish_reason"])
    if usage:
        yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]}


def _words(text: str) -> list[str]:
    """Words with their trailing space, as a model streams tokens."""
    pieces = text.split(" ")
    return [piece + " " for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def _choice(partial: Body) -> Body:
    """An Anthropic-format scripted message as an OpenAI choice."""
    blocks = partial.get("content", [])
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    calls = [
        {"id": b["id"].replace("toolu_", "call_"), "type": "function",
         "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
        for b in blocks if b["type"] == "tool_use"
    ]  # fmt: skip
    message: Body = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    finish = FINISH.get(partial.get("stop_reason") or "end_turn", "stop")
    return {"index": 0, "message": message, "finish_reason": finish}


def _error_body(reply: Reply) -> Body:
    body = reply.body or {}
    if "error" in body and "type" not in body:
        return body  # already OpenAI's shape
    error = body.get("error") or {}
    kinds = {"rate_limit_error": "requests", "overloaded_error": "server_error", "api_error": "server_error"}
    kind = kinds.get(error.get("type", ""), "invalid_request_error")
    message = error.get("message", "error")
    code = "context_length_exceeded" if "prompt is too long" in message else None
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# -- request bodies, in either provider's format -----------------------------------------------------------


def said(body: Body) -> str:
    """The last paragraph of the last user text (Anthropic: of the last text block of the last user message):
    what the user typed, without the context blocks before it."""
    for message in reversed(body.get("messages", [])):
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content.rsplit("\n\n", 1)[-1]
        texts = [b.get("text", "") for b in content if b.get("type") == "text"]
        return texts[-1].rsplit("\n\n", 1)[-1] if texts else ""
    return ""


def results(body: Body) -> list[str]:
    """The tool results the request ends with, as text (Anthropic tool_result blocks or OpenAI tool messages)."""
    messages = body.get("messages", [])
    out: list[str] = []
    for message in reversed(messages):
        if message["role"] == "tool":
            out.insert(0, message["content"])
            continue
        if message["role"] == "user" and not isinstance(message["content"], str) and not out:
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    out.append(content if isinstance(content, str) else json.dumps(content))
        break
    return out
