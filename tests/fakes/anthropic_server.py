"""A scripted Anthropic Messages API on 127.0.0.1, for driving the real ``anthropic`` SDK in tests.

The server speaks the wire format of ``POST /v1/messages`` (``content`` blocks of ``text`` and
``tool_use``, ``stop_reason``, ``usage`` with cache figures), can answer errors with ``retry-after``,
can stall, and can answer a 200 whose body is not a message (``raw``: cut short, or JSON of another
shape). Every request body is kept in ``server.requests`` so a test can assert on exactly what the model
was sent.

Replies come from a queue (``server.queue(...)``) and, when it is empty, from ``server.responder`` (a
function of the request body), so a test can script a fixed exchange or a small "model" that reacts to
what it was sent.

Prompt caching is emulated by Anthropic's documented rules (``tests.fakes.prompt_cache``: the prefix tools ->
system -> messages up to each ``cache_control`` breakpoint, at most 4 of them, a 20-block lookback, the
model's minimum cacheable length, entries living 5 minutes or an hour, refreshed on a hit): the usage of a
200 says what was read, written and sent in full, and ``server.cache.log`` keeps each request's figures. A
request the real API refuses for its breakpoints is answered with its 400 (no scripted reply is used). The
clock and the minimum are the constructor's: ``FakeAnthropic(clock=fake_clock, min_cache_tokens=2048)``.
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.prompt_cache import CacheRequestError, PromptCache, blocks_of, check
from tests.fakes.scripted import ScriptedServer

Body = dict[str, Any]


@dataclass
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    body: Body | None = None  # for 200: a partial Message (content, stop_reason, usage); else an error body
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to stall before answering
    # Streamed requests only: the first ``pause_at`` characters of the text go out, then the stream waits
    # for ``pause`` (a test holds the answer half-written, as a slow model would).
    pause: threading.Event | None = None
    pause_at: int = 0
    raw: bytes | None = None  # a 200 whose body is exactly these bytes (a malformed answer), streamed or not


def raw(body: bytes | str) -> Reply:
    """A 200 ``application/json`` answer of exactly ``body``: truncated JSON, or JSON of the wrong shape."""
    return Reply(raw=body.encode() if isinstance(body, str) else body)


def text(content: str, *, delay: float = 0.0, usage: dict[str, int] | None = None) -> Reply:
    return Reply(
        body={"content": [{"type": "text", "text": content}], "stop_reason": "end_turn", "usage": usage}, delay=delay
    )


def tool_use(*calls: tuple[str, dict[str, Any]], say: str | None = None, delay: float = 0.0) -> Reply:
    """A response asking for one or more tool calls (parallel tool use when more than one)."""
    blocks: list[Body] = [{"type": "text", "text": say}] if say else []
    for name, tool_input in calls:
        blocks.append({"type": "tool_use", "id": _tool_id(), "name": name, "input": tool_input})
    return Reply(body={"content": blocks, "stop_reason": "tool_use"}, delay=delay)


def halted(first: str, rest: str, gate: threading.Event) -> Reply:
    """A text answer streamed up to the end of ``first``, then held until ``gate`` is set."""
    reply = text(first + rest)
    reply.pause, reply.pause_at = gate, len(first)
    return reply


def sequence(*replies: Reply, then: Callable[[Body], Reply] | None = None) -> Callable[[Body], Reply]:
    """A responder answering ``replies`` in order, then ``then`` (default: "ok")."""
    pending = collections.deque(replies)

    def respond(body: Body) -> Reply:
        if pending:
            return pending.popleft()
        return then(body) if then else text("ok")

    return respond


def error(status: int, kind: str = "", message: str = "", *, retry_after: float | None = None) -> Reply:
    kind = kind or {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error"}.get(
        status, "invalid_request_error"
    )
    headers = {} if retry_after is None else {"retry-after": str(retry_after)}
    return Reply(
        status=status, body={"type": "error", "error": {"type": kind, "message": message or kind}}, headers=headers
    )


def overloaded(retry_after: float | None = None) -> Reply:
    return error(529, "overloaded_error", "Overloaded", retry_after=retry_after)


def prompt_too_long(tokens: int = 210_000) -> Reply:
    return error(400, "invalid_request_error", f"prompt is too long: {tokens} tokens > 200000 maximum")


_ids = itertools.count(1)


def _tool_id() -> str:
    return f"toolu_{next(_ids):08d}"


def body_text(body: Body) -> str:
    """All the text a request carries (system, messages, tool results), for containment assertions."""
    return json.dumps(body, ensure_ascii=False)


def system_text(body: Body) -> str:
    """The system prompt's text (blocks joined, or the string a view carries)."""
    system = body.get("system") or ""
    return system if isinstance(system, str) else "\n\n".join(b.get("text", "") for b in system)


def _last_user_texts(body: Body) -> list[str]:
    """The text blocks of the last user message (its string content as one)."""
    for message in reversed(body.get("messages", [])):
        if message["role"] == "user":
            content = message["content"]
            return (
                [content]
                if isinstance(content, str)
                else [b.get("text", "") for b in content if b.get("type") == "text"]
            )
    return []


def last_user_text(body: Body) -> str:
    """The text of the last user message (string content or text blocks)."""
    return "\n".join(_last_user_texts(body))


def user_said(body: Body) -> str:
    """The last text block of the last user message: what the user typed, without context blocks before it."""
    texts = _last_user_texts(body)
    return texts[-1] if texts else ""


def tool_results(body: Body) -> list[Body]:
    """tool_result blocks of the last user message (what the model gets back after a tool_use)."""
    messages = body.get("messages", [])
    if not messages or messages[-1]["role"] != "user" or isinstance(messages[-1]["content"], str):
        return []
    return [b for b in messages[-1]["content"] if b.get("type") == "tool_result"]


def result_text(block: Body) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


class FakeAnthropic(ScriptedServer[Reply]):
    """The server. Use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, min_cache_tokens: int = 1024) -> None:
        super().__init__(lambda body: text("ok"))
        self.cache = PromptCache(clock=clock, min_tokens=min_cache_tokens)

    # -- script ---------------------------------------------------------------------------------------
    def bodies_since(self, start: int) -> list[Body]:
        return self.requests[start:]

    @property
    def base_url(self) -> str:
        return self.root

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> FakeAnthropic:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms ACK stalls

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                fake.arrived()
                if self.path.split("?")[0] != "/v1/messages":
                    self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": "no"}})
                    return
                body = json.loads(raw)
                refused = fake._refused(body)
                if refused is not None:
                    self._send(400, refused)
                    return
                reply = fake._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw is not None:
                    self._send_raw(reply.raw)
                elif reply.status == 200 and body.get("stream"):
                    self._stream(fake._message(body, reply), reply)
                elif reply.status == 200:
                    self._send(200, fake._message(body, reply), reply.headers)
                else:
                    self._send(reply.status, reply.body or {}, reply.headers)

            def _send(self, status: int, payload: Body, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("request-id", f"req_{next(_ids)}")
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout or a cancelled turn)

            def _send_raw(self, data: bytes) -> None:
                try:
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _stream(self, message: Body, reply: Reply) -> None:
                """The same message as server-sent events, text in small pieces, as the real API streams."""
                self.close_connection = True  # no content-length: the end of the stream is the end of the body
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for event in _events(message, reply):
                        if event is None:
                            assert reply.pause is not None
                            reply.pause.wait()
                            continue
                        self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return self.serve(Handler, "fake-anthropic")

    # -- internals ------------------------------------------------------------------------------------

    def _message(self, body: Body, reply: Reply) -> Body:
        partial = dict(reply.body or {})
        usage = partial.pop("usage", None) or self._usage(body, partial)
        return {
            "id": f"msg_{next(_ids):08d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-test"),
            "content": partial.get("content", []),
            "stop_reason": partial.get("stop_reason", "end_turn"),
            "stop_sequence": None,
            "usage": usage,
        }

    def _refused(self, body: Body) -> Body | None:
        """The 400 the real API answers a request's breakpoints with, before any model runs (kept in
        ``requests`` all the same: it was sent)."""
        try:
            check(blocks_of(body))
        except CacheRequestError as exc:
            with self._lock:
                self.requests.append(body)
            return {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}}
        return None

    def _usage(self, body: Body, reply: Body) -> dict[str, Any]:
        """Token figures from the prompt's size (about 4 characters a token), with prompt caching emulated."""
        usage = self.cache.bill(body).usage()
        usage["output_tokens"] = max(1, len(json.dumps(reply.get("content", []))) // 4)
        return usage


def _events(message: Body, reply: Reply) -> Iterable[Body | None]:
    """The stream of one message; ``None`` marks where it waits for ``reply.pause``."""
    usage = message["usage"]
    yield {"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                "usage": {**usage, "output_tokens": 1}}}  # fmt: skip
    written, held = 0, reply.pause is None
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            for piece in _pieces(block["text"]):
                parts = [piece]
                if not held and written + len(piece) >= reply.pause_at:
                    cut = reply.pause_at - written
                    parts, held = [piece[:cut], None, piece[cut:]], True
                for part in parts:
                    if part is None:
                        yield None
                    elif part:
                        written += len(part)
                        delta = {"type": "text_delta", "text": part}
                        yield {"type": "content_block_delta", "index": index, "delta": delta}
        else:
            yield {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
           "usage": {"output_tokens": usage["output_tokens"]}}  # fmt: skip
    yield {"type": "message_stop"}


def _pieces(text: str) -> list[str]:
    """Words with their trailing space, as a model streams tokens."""
    pieces, start = [], 0
    for i, char in enumerate(text):
        if char == " ":
            pieces.append(text[start : i + 1])
            start = i + 1
    if start < len(text):
        pieces.append(text[start:])
    return pieces
