"""OpenAI-compatible answers stream to a watching screen: the real ``openai`` SDK reading server-sent events from
the scripted server on 127.0.0.1, text passed on piece by piece, tool calls put back together from their
fragments, and servers that cannot stream tool calls answered in one piece after one line in the log."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from teleton.llm import LLMClient, LLMError, LLMSettings, ToolCall, ToolResult, run_tool_loop
from teleton.llm.openai_provider import OpenAIProvider
from teleton.llm.progress import WATCHING, Progress
from tests.fakes.anthropic_server import text, tool_use
from tests.fakes.openai_server import FakeOpenAI, completion, cut, oa_error

HELLO = [{"role": "user", "content": "hello"}]
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather of a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
ANSWER = "Lisbon is sunny today, twenty one degrees, with a light breeze from the sea."


@dataclass
class Screen:
    """What a watching terminal is told, in order."""

    pieces: list[str] = field(default_factory=list)
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    retries: list[str] = field(default_factory=list)

    def progress(self) -> Progress:
        return Progress(
            text=self.pieces.append,
            tool=lambda name, arguments: self.tools.append((name, arguments)),
            retry=lambda attempt, wait, reason: self.retries.append(reason),
        )


@pytest.fixture
async def oa_llm(fake_openai: FakeOpenAI) -> AsyncIterator[LLMClient]:
    settings = LLMSettings(model="gpt-test", utility_model="gpt-test-small", max_tokens=512, max_retries=3,
                           retry_base_delay_s=0.001, retry_max_delay_s=0.01)  # fmt: skip
    client = LLMClient(settings, provider=OpenAIProvider(api_key="test", base_url=fake_openai.base_url), name="local")
    yield client
    await client.close()


def fallbacks(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "stream_fallback"]


async def test_text_streams_to_the_screen_piece_by_piece(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    screen = Screen()
    fake_openai.queue(text(ANSWER, usage={"input_tokens": 300, "cache_read_input_tokens": 600, "output_tokens": 17}))
    response = await oa_llm.create(system="s", messages=HELLO, progress=screen.progress())
    assert len(screen.pieces) == len(ANSWER.split(" ")) > 10  # a word at a time, as the server sent them
    assert "".join(screen.pieces) == ANSWER == response.text
    assert response.stop_reason == "end_turn" and response.model == "gpt-test"
    # The usage chunk at the end of the stream is counted as a non-streamed answer's usage is.
    assert (response.usage.input_tokens, response.usage.cache_read_tokens, response.usage.output_tokens) == (
        300, 600, 17,
    )  # fmt: skip
    [sent] = fake_openai.requests
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_nobody_watching_means_no_stream(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    response = await oa_llm.create(system="s", messages=HELLO)
    assert response.text == "ok" and "stream" not in fake_openai.requests[0]


async def test_tool_calls_are_put_together_from_their_fragments(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    ran: list[ToolCall] = []

    async def weather(call: ToolCall) -> ToolResult:
        ran.append(call)
        return ToolResult(f"{call.input['city']}: 21 C, sunny")

    fake_openai.queue(
        tool_use(("get_weather", {"city": "Lisbon, Portugal"}), ("get_weather", {"city": "Porto"}),
                 say="Let me look both up."),
        text(ANSWER),
    )  # fmt: skip
    screen = Screen()
    token = WATCHING.set(screen.progress())
    try:
        result = await run_tool_loop(oa_llm, system="s", messages=HELLO, tools=[WEATHER_TOOL], execute=weather)
    finally:
        WATCHING.reset(token)
    # Each call's arguments came in pieces of a few characters; joined, they are the JSON the model wrote.
    assert [call.input for call in ran] == [{"city": "Lisbon, Portugal"}, {"city": "Porto"}]
    assert screen.tools == [("get_weather", {"city": "Lisbon, Portugal"}), ("get_weather", {"city": "Porto"})]
    assert "".join(screen.pieces) == "Let me look both up." + ANSWER and result.text == ANSWER
    first, second = fake_openai.requests
    assert first["stream"] and second["stream"]
    calls = second["messages"][-3]["tool_calls"]  # the assistant turn replayed: ids from the stream
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_weather"]
    assert [m["tool_call_id"] for m in second["messages"][-2:]] == [c["id"] for c in calls] == [c.id for c in ran]
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Lisbon, Portugal"}


async def test_broken_streamed_arguments_go_back_to_the_model(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(completion(tool_calls=[("get_weather", '{"city": "Lis')]))
    response = await oa_llm.create(system="s", messages=HELLO, tools=[WEATHER_TOOL], progress=Screen().progress())
    [call] = response.tool_uses
    assert response.stop_reason == "tool_use" and call["input"] == {}
    assert "not valid JSON" in response.invalid_inputs[call["id"]]


@pytest.mark.parametrize("server", ["refuse", "silent", "whole"])
async def test_a_server_that_cannot_stream_tool_calls_answers_in_one_piece(
    oa_llm: LLMClient, fake_openai: FakeOpenAI, logs: list[dict[str, Any]], server: Any
) -> None:
    fake_openai.tools_in_stream = server
    fake_openai.queue(tool_use(("get_weather", {"city": "Lisbon"})), text(ANSWER))
    screen = Screen()
    first = await oa_llm.create(system="s", messages=HELLO, tools=[WEATHER_TOOL], progress=screen.progress())
    assert first.tool_uses[0]["input"] == {"city": "Lisbon"}
    # "whole" ignored ``stream`` and answered with the completion itself: nothing to ask again.
    asked = [bool(body.get("stream")) for body in fake_openai.requests]
    assert asked == ([True] if server == "whole" else [True, False])
    second = await oa_llm.create(system="s", messages=HELLO, tools=[WEATHER_TOOL], progress=screen.progress())
    assert second.text == ANSWER and screen.pieces == [ANSWER]  # the answer in one piece
    assert [bool(body.get("stream")) for body in fake_openai.requests[len(asked) :]] == [False]  # remembered
    [said] = fallbacks(logs)  # once, for this provider
    assert said["provider"] == "openai" and said["log_level"] == "info"


async def test_a_stream_cut_half_way_is_asked_again(
    oa_llm: LLMClient, fake_openai: FakeOpenAI, logs: list[dict[str, Any]]
) -> None:
    fake_openai.queue(cut(text(ANSWER), after=4), text(ANSWER))
    screen = Screen()
    response = await oa_llm.create(system="s", messages=HELLO, progress=screen.progress())
    assert response.text == ANSWER and len(fake_openai.requests) == 2
    # The screen saw the first words, was told of the retry, then the whole answer.
    assert screen.retries == ["stream cut short: it ended before its finish_reason"]
    assert "".join(screen.pieces) == " ".join(ANSWER.split(" ")[:3]) + " " + ANSWER
    assert not fallbacks(logs) and all(body["stream"] for body in fake_openai.requests)


async def test_streams_cut_every_time_end_as_the_unavailable_model(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.responder = lambda body: cut(text(ANSWER), after=2)
    with pytest.raises(LLMError, match="model unavailable after 4 attempts: stream cut short"):
        await oa_llm.create(system="s", messages=HELLO, progress=Screen().progress())
    assert len(fake_openai.requests) == 4


async def test_errors_of_a_streamed_request_are_those_of_any_request(
    oa_llm: LLMClient, fake_openai: FakeOpenAI
) -> None:
    fake_openai.queue(oa_error(429, "slow down", retry_after=0.001), oa_error(529, "overloaded"), text("back"))
    screen = Screen()
    assert (await oa_llm.create(system="s", messages=HELLO, progress=screen.progress())).text == "back"
    assert len(screen.retries) == 2
    fake_openai.queue(oa_error(401, "Incorrect API key provided", code="invalid_api_key"))
    with pytest.raises(LLMError) as caught:
        await oa_llm.create(system="s", messages=HELLO, progress=screen.progress())
    assert caught.value.key_rejected and len(fake_openai.requests) == 4


async def test_an_unreachable_server_while_streaming(fake_openai: FakeOpenAI) -> None:
    settings = LLMSettings(model="gpt-test", max_retries=1, retry_base_delay_s=0.001, retry_max_delay_s=0.01)
    provider = OpenAIProvider(api_key="test", base_url="http://127.0.0.1:9/v1")
    client = LLMClient(settings, provider=provider, name="local")
    try:
        with pytest.raises(LLMError) as caught:
            await client.create(system="s", messages=HELLO, progress=Screen().progress())
    finally:
        await client.close()
    assert caught.value.unreachable and provider.streams  # a dropped connection is no reason to stop streaming
