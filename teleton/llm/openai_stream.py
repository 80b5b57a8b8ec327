"""One streamed chat completion put back together (server-sent ``chat.completion.chunk`` objects).

Text pieces are passed on as they arrive; tool calls are assembled from their fragments (``index`` says which
call a fragment belongs to; its ``id`` and ``name`` come first, the arguments JSON follows in pieces); usage
comes in a chunk of its own before the end when ``stream_options.include_usage`` was asked. What comes out is
the completion a non-streamed request would have returned, so the provider reads both the same way.

A stream that ends without a ``finish_reason`` was cut short, unless nothing at all arrived on a request with
tools: then the server is one that cannot stream tool calls (it says so in no other way).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field
from typing import Any

from teleton.llm.types import TransientError, malformed

Chunk = dict[str, Any]


class StreamRefused(Exception):
    """The server does not stream this request; asking once more without ``stream`` will do."""


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: str = ""
    whole: dict[str, Any] | None = None  # arguments sent as an object, by a server that sends calls whole


@dataclass
class Assembly:
    """What the chunks of one stream said so far."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Chunk | None = None
    model: str | None = None
    arrived: bool = False  # any choice at all: the server did stream

    def add(self, chunk: object) -> str:
        """Take one chunk as it arrived (any JSON); its text piece, "" for none."""
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices", []), list):
            raise malformed("a stream chunk of no known shape", chunk)
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"] or self.model
        piece = ""
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # one choice is asked for; another is noise
            self.arrived = True
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise malformed("a stream delta of no known shape", chunk)
            content = delta.get("content")
            if isinstance(content, str):
                piece += content
            for fragment in delta.get("tool_calls") or []:
                self._call(fragment, chunk)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        if piece:
            self.text.append(piece)
        return piece

    def _call(self, fragment: object, chunk: Chunk) -> None:
        if not isinstance(fragment, dict):
            raise malformed("a tool call fragment of no known shape", chunk)
        index = fragment.get("index")
        if not isinstance(index, int):
            # A few servers leave out the index: a new id is a new call, anything else continues the last.
            known = {call.id for call in self.calls.values()}
            new = not self.calls or (fragment.get("id") and fragment["id"] not in known)
            index = len(self.calls) if new else max(self.calls)
        call = self.calls.setdefault(index, _Call())
        if isinstance(fragment.get("id"), str) and not call.id:
            call.id = fragment["id"]
        function = fragment.get("function") or {}
        if not isinstance(function, dict):
            raise malformed("a tool call fragment of no known shape", chunk)
        name = function.get("name")
        if isinstance(name, str) and name != call.name:  # some servers repeat the name in every fragment
            call.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments += arguments
        elif isinstance(arguments, dict):
            call.whole = arguments

    def completion(self, requested_tools: bool) -> Chunk:
        """The completion the chunks make up, as a non-streamed request would have returned it."""
        if self.finish_reason is None:
            if not self.arrived and requested_tools:
                raise StreamRefused("the stream ended before anything arrived")
            raise TransientError("stream cut short: it ended before its finish_reason")
        message: Chunk = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [_tool_call(call) for _, call in sorted(self.calls.items())]
        choice = {"index": 0, "message": message, "finish_reason": self.finish_reason}
        return {"model": self.model, "choices": [choice], "usage": self.usage}


def _tool_call(call: _Call) -> Chunk:
    arguments: Any = call.whole if call.whole is not None else call.arguments
    # Some local servers stream calls without ids; the history needs one to pair the call with its result.
    call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
    return {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


async def assemble(chunks: AsyncIterable[Any], on_text: Callable[[str], None]) -> Assembly:
    """Read a stream to its end, passing each text piece to ``on_text`` as it arrives."""
    assembly = Assembly()
    async for chunk in chunks:
        # The SDK builds its objects without validating them; ``to_dict`` is what arrived.
        to_dict = getattr(chunk, "to_dict", None)
        piece = assembly.add(to_dict(warnings=False) if callable(to_dict) else chunk)
        if piece:
            on_text(piece)
    return assembly
