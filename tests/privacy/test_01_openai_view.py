"""The OpenAI half of the suite reads requests through ``anthropic_view``: it must give back exactly what
Teleton sent, or an oracle could miss a leak. Round trip through the real OpenAI request translation."""

from __future__ import annotations

import pytest

from teleton.agent.prompt.memory import FEED_HEADER
from teleton.llm.openai_provider import to_chat_messages
from tests.fakes.openai_view import FakeOpenAIInAnthropicTerms, anthropic_view
from tests.privacy.scenario import request_texts
from tests.privacy.world import World

pytestmark = pytest.mark.costly

SYSTEM = [{"type": "text", "text": "You are Teleton.", "cache_control": {"type": "ephemeral"}},
          {"type": "text", "text": "## This chat\nYou are in a group (id -100)"}]  # fmt: skip
MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": FEED_HEADER + "\n[2026-01-01 10:00] Bob: CALL x {}"},
                                 {"type": "text", "text": "## Now\nMonday 2026-01-05 10:00 UTC\nYou are answering "
                                                          "Mallory, id 66."},
                                 {"type": "text", "text": "Mallory: CALL memory_read {\"target\": \"memory\"}"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "memory_read",
                                       "input": {"target": "memory"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "secret 123"},
                                 {"type": "tool_result", "tool_use_id": "call_2", "content": "denied",
                                  "is_error": True}]},
]  # fmt: skip


def test_the_view_gives_back_what_teleton_sent() -> None:
    chat = {"model": "claude-test", "messages": to_chat_messages(SYSTEM, MESSAGES), "tools": []}
    view = anthropic_view(chat)
    assert view["system"] == "You are Teleton.\n\n## This chat\nYou are in a group (id -100)"
    # Context, the turn's note and what was typed, apart again.
    assert view["messages"][0]["content"] == MESSAGES[0]["content"]
    assert view["messages"][1]["content"] == MESSAGES[1]["content"]
    results = view["messages"][2]["content"]
    assert [(r["tool_use_id"], r["content"], r.get("is_error", False)) for r in results] == [
        ("call_1", "secret 123", False),
        ("call_2", "Error: denied", True),
    ]
    assert "secret 123" in "\n".join(request_texts(view))


def test_the_openai_worlds_ran_on_the_openai_format(main_world: World) -> None:
    if isinstance(main_world.api, FakeOpenAIInAnthropicTerms):
        assert main_world.api.raw > 0 and main_world.api.raw == len(main_world.api.requests)
    else:
        assert main_world.api.requests and all("system" in body for body in main_world.api.requests)
