"""`teleton chat` with a local OpenAI-compatible server: the answer arrives on the screen as the model writes
it (server-sent events through the real ``openai`` SDK), in a pseudo-terminal read back by a terminal emulator."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.cli.test_chat_terminal import Terminal
from tests.cli.test_chat_terminal import open_terminal as open_chat
from tests.fakes.anthropic_server import Reply, halted, text, tool_use
from tests.fakes.openai_server import FakeOpenAI

FIRST, REST = "The first half is on the screen", " and the second half came later."


def open_terminal(tmp_path: Path, fake: FakeOpenAI) -> Terminal:
    agent = {"provider": "vllm", "base_url": fake.base_url, "model": "qwen3:8b", "utility_model": "qwen3:8b"}
    return open_chat(tmp_path, fake.base_url, agent)


def test_a_local_model_answer_streams_onto_the_screen(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    gate = threading.Event()
    answers = iter([tool_use(("memory_save", {"value": "The boat is blue"})), halted(FIRST, REST, gate)])

    def model(body: dict) -> Reply:
        return next(answers, text("ok")) if body.get("stream") else text("ok")

    fake_openai.responder = model
    term = open_terminal(tmp_path, fake_openai)
    try:
        term.type("remember: the boat is blue, and tell me something")
        shown = term.wait_text(FIRST)
        # The model still holds the rest: what is visible arrived as it was written, after the tool call
        # assembled from the stream's fragments.
        assert "second half" not in shown
        assert shown.count('· memory_save(value="The boat is blue")') == 1
        gate.set()
        shown = term.wait_text("and the second half came later.")
        term.wait_for(lambda s: "thinking" not in s, "the spinner to go")
        assert shown.count(FIRST) == 1  # streamed, then not printed again
    finally:
        term.close()
    streamed = [body for body in fake_openai.requests if body.get("stream")]
    assert len(streamed) == 2 and all(body["stream_options"] == {"include_usage": True} for body in streamed)
