"""The privacy suites on the OpenAI-compatible provider: the fake server sees OpenAI's wire format, and the
obedient model and the leak oracles read it in the Messages API's shape they were written for.

``anthropic_view`` is the inverse of ``teleton.llm.openai_provider.to_chat_messages``, for test use only:
the system message becomes ``system``, ``tool_calls`` become ``tool_use`` blocks (arguments parsed), ``role:
tool`` messages become one user message of ``tool_result`` blocks, and user text stays text. Nothing a
request carried is dropped, so an oracle scanning the view scans everything the model was sent.

One thing the OpenAI format merges: the retrieved-context block, the turn's note (daily logs, ``## Now``)
and what the sender typed travel as one string (joined by blank lines) when there is no image. The view splits
them again where each ends (the context starts with one of its headers, the note with one of its sections and
ends with the ``## Now`` paragraph; what follows was typed), so the obedient model still tells a typed
directive (always run) from one met in context (run once per chat).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.anthropic_server import Body, Reply
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.turn_message import NOTE_SECTIONS

PROVIDERS = ("anthropic", "openai")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


# The turn's note: its first section, and its last paragraph (the time and whom the turn answers).
_NOTE_START = re.compile("(?:^|\n\n)(" + "|".join(map(re.escape, NOTE_SECTIONS)) + ")")
_NOTE_END = re.compile(r"## Now\n[^\n]*(?:\nYou are answering [^\n]*)?(?:\n\n|$)")


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    """Context, the turn's note and what was typed as blocks again; any other user text as the string it
    was; an ``image_url`` data URL as the image block it came from, in its place."""
    if isinstance(content, list):
        return [_image_block(p) if p.get("type") == "image_url" else p for p in content]
    start = _NOTE_START.search(content)
    ends = list(_NOTE_END.finditer(content, start.start(1))) if start else []
    if start is None or not ends:
        return content
    end = ends[-1].end()  # the last: what was typed comes after the note
    context, note, typed = content[: start.start()], content[start.start(1) : end], content[end:]
    blocks = [{"type": "text", "text": context}] if context else []
    return [*blocks, {"type": "text", "text": note.rstrip("\n")}, {"type": "text", "text": typed}]


def _image_block(part: dict[str, Any]) -> dict[str, Any]:
    url = part["image_url"]["url"]
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": _text(message["content"])})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"_raw": function.get("arguments")}
        blocks.append({"type": "tool_use", "id": call["id"], "name": function.get("name", ""), "input": arguments})
    return blocks


def anthropic_view(body: Body) -> Body:
    """An OpenAI chat-completions request as the Messages API request it stands for."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for message in body.get("messages", []):
        role = message["role"]
        if role in ("system", "developer"):
            system.append(_text(message["content"]))
        elif role == "assistant":
            messages.append({"role": "assistant", "content": _assistant_blocks(message)})
        elif role == "tool":
            content = _text(message.get("content"))
            is_error = content.startswith("Error: ")
            result = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": content}
            if is_error:
                result["is_error"] = True
            if messages and messages[-1]["role"] == "user" and messages[-1].get("_results"):
                messages[-1]["content"].append(result)
            else:
                messages.append({"role": "user", "content": [result], "_results": True})
        else:
            messages.append({"role": "user", "content": _user_content(message["content"])})
    for message in messages:
        message.pop("_results", None)
    tools = [
        {"name": t["function"]["name"], "description": t["function"].get("description", ""),
         "input_schema": t["function"].get("parameters", {})}
        for t in body.get("tools") or []
    ]  # fmt: skip
    view: Body = {"model": body.get("model"), "system": "\n\n".join(system), "messages": messages, "tools": tools}
    return {**{k: v for k, v in body.items() if k not in ("messages", "tools")}, **view}


class FakeOpenAIInAnthropicTerms(FakeOpenAI):
    """The scripted OpenAI-compatible server whose ``requests`` and responder see ``anthropic_view`` bodies
    (replies are scripted in the Messages vocabulary anyway, and sent in OpenAI's format)."""

    def __init__(self) -> None:
        super().__init__()
        self.raw_requests: list[Body] = []  # the bodies as they arrived, in OpenAI's format

    @property
    def raw(self) -> int:
        """Requests that arrived in OpenAI's format (the suites' proof that this provider ran)."""
        return sum(1 for body in self.raw_requests if body.get("messages") and "system" not in body)

    def _next(self, body: Body) -> Reply:
        self.raw_requests.append(body)
        return super()._next(anthropic_view(body))


def provider_config(provider: str) -> dict[str, Any]:
    """The config overrides that point the daemon's main model at the fake of ``provider``."""
    if provider == "anthropic":
        return {}
    return {"agent.provider": "openai_compatible"}
