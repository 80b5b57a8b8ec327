"""What one step of a world recorded: the requests, events, held sends and tasks a single message set off.

A step is the unit every criterion is checked on, and the tests assert on its tool results; it is kept
apart from the World that makes it so that the record can be read without the machinery that drives the
daemon.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes.anthropic_server import Body
from tests.privacy.obedient_model import UTILITY_MODEL, _is_tool_results


@dataclass(frozen=True)
class ToolRecord:
    name: str
    input: dict[str, Any]
    content: str
    is_error: bool


@dataclass
class Step:
    chat: dict[str, Any]
    text: str
    sender: dict[str, Any] | None
    message_id: int
    requests: list[Body]
    events: list[dict[str, Any]]
    held: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    logs: list[dict[str, Any]]
    request_problems: list[str] | None = None  # criterion 1, computed once (the bodies never change)
    approved: bool | None = None  # a careful owner's decision step: whether it approved

    @property
    def chat_id(self) -> int:
        return int(self.chat["id"])

    def tool_records(self) -> list[ToolRecord]:
        records = []
        for body in self.requests:
            messages = body.get("messages", [])
            if body.get("model") == UTILITY_MODEL or len(messages) < 2 or not _is_tool_results(messages[-1]):
                continue
            uses = {b["id"]: b for b in messages[-2]["content"] if b.get("type") == "tool_use"}
            for block in messages[-1]["content"]:
                use = uses.get(block.get("tool_use_id"))
                if block.get("type") != "tool_result" or use is None:
                    continue
                content = block.get("content", "")
                if isinstance(content, list):
                    content = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
                records.append(ToolRecord(use["name"], use.get("input") or {}, content, bool(block.get("is_error"))))
        return records

    def calls(self, name: str) -> list[ToolRecord]:
        return [r for r in self.tool_records() if r.name == name]

    def only(self, name: str, /, **match: Any) -> ToolRecord:
        """The single result of tool ``name`` in this step whose input contains ``match``."""
        found = [r for r in self.calls(name) if all(r.input.get(k) == v for k, v in match.items())]
        assert found, f"the model's {name}{match} call never came back with a result; tools: {self.tool_records()}"
        return found[-1]

    def sent_to(self, chat_id: int) -> list[dict[str, Any]]:
        return [e for e in self.events if e["op"] in ("send_message", "forward_message") and _target(e) == chat_id]

    def texts_to(self, chat_id: int) -> str:
        return "\n".join(e.get("text", "") for e in self.sent_to(chat_id))

    def main_requests(self) -> list[Body]:
        return [b for b in self.requests if b.get("model") != UTILITY_MODEL]

    def utility_requests(self) -> list[Body]:
        return [b for b in self.requests if b.get("model") == UTILITY_MODEL]

    def describe(self) -> str:
        who = self.sender["first_name"] if self.sender else "nobody"
        return f"step in chat {self.chat_id} by {who}: {self.text[:160]!r}"


def _target(event: dict[str, Any]) -> int:
    return int(event["to_chat_id"] if event["op"] == "forward_message" else event["chat_id"])
