"""The OpenAI-compatible provider: the real ``openai`` SDK against the scripted server, through Teleton's
client and tool loop (Anthropic format above, OpenAI's wire format below)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from teleton.config.schema import AgentConfig
from teleton.llm import ContextOverflowError, LLMClient, LLMError, LLMSettings, ToolCall, ToolResult, run_tool_loop
from teleton.llm.connect import client_for
from teleton.llm.openai_provider import OpenAIProvider
from tests.fakes.anthropic_server import error, text, tool_use
from tests.fakes.openai_server import FakeOpenAI, completion, context_too_long, oa_error

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather of a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture
async def oa_llm(fake_openai: FakeOpenAI) -> AsyncIterator[LLMClient]:
    settings = LLMSettings(
        model="gpt-test", utility_model="gpt-test-small", max_tokens=512, max_retries=6,
        retry_base_delay_s=0.01, retry_max_delay_s=0.5,
    )  # fmt: skip
    client = LLMClient(settings, provider=OpenAIProvider(api_key="test", base_url=fake_openai.base_url))
    yield client
    await client.close()


async def weather(call: ToolCall) -> ToolResult:
    return ToolResult(f"{call.input['city']}: 21 C, sunny")


async def test_a_tool_loop_round_trip_in_openai_wire_format(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(
        completion(tool_calls=[("get_weather", '{"city": "Lisbon"}')]),
        completion("Lisbon is sunny, 21 C.", usage={"prompt_tokens": 900, "completion_tokens": 12,
                                                     "prompt_tokens_details": {"cached_tokens": 600}}),
    )  # fmt: skip
    system = [
        {"type": "text", "text": "You are Teleton.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Today is Monday."},
    ]
    question = [
        {"type": "text", "text": "What is the weather where this photo was taken?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}},
    ]
    result = await run_tool_loop(
        oa_llm, system=system, messages=[{"role": "user", "content": question}], tools=[WEATHER_TOOL], execute=weather
    )
    assert result.text == "Lisbon is sunny, 21 C." and result.called("get_weather")
    assert result.last_usage.input_tokens == 300 and result.last_usage.cache_read_tokens == 600
    assert result.last_usage.prompt_tokens == 900 and result.last_usage.output_tokens == 12

    first, second = fake_openai.requests
    assert first["tools"] == [
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city.",
                                          "parameters": WEATHER_TOOL["input_schema"]}}
    ]  # fmt: skip
    assert first["messages"][0] == {"role": "system", "content": "You are Teleton.\n\nToday is Monday."}
    assert "cache_control" not in json.dumps(first)
    parts = first["messages"][1]["content"]
    assert parts[0] == {"type": "text", "text": "What is the weather where this photo was taken?"}
    assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}
    assistant, tool = second["messages"][2:4]
    call = assistant["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Lisbon"}
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": "Lisbon: 21 C, sunny"}


async def test_tool_choice_and_stop_reasons_translate(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(completion("cut sho", finish_reason="length"), text("fine"))
    forced = await oa_llm.create(
        system="s", messages=[{"role": "user", "content": "hi"}], tools=[WEATHER_TOOL],
        tool_choice={"type": "tool", "name": "get_weather"},
    )  # fmt: skip
    assert forced.stop_reason == "max_tokens"
    assert fake_openai.requests[0]["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    await oa_llm.create(system="s", messages=[{"role": "user", "content": "hi"}], tools=[WEATHER_TOOL],
                        tool_choice={"type": "any"})  # fmt: skip
    assert fake_openai.requests[1]["tool_choice"] == "required"


async def test_usage_is_estimated_when_the_server_sends_none(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    reply = completion("hello there")
    assert reply.body is not None
    reply.body["usage"] = None
    fake_openai.queue(reply)
    response = await oa_llm.create(system="s", messages=[{"role": "user", "content": "a fairly long question " * 20}])
    assert response.text == "hello there"
    assert response.usage.input_tokens > 100 and response.usage.output_tokens > 0


async def test_a_429_with_retry_after_is_retried_once(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(oa_error(429, "Rate limit reached", code="rate_limit_exceeded", retry_after=0.01), text("hi"))
    response = await oa_llm.create(system="s", messages=[{"role": "user", "content": "hello"}])
    assert response.text == "hi" and oa_llm.retries == 1 and len(fake_openai.requests) == 2


async def test_a_500_storm_then_an_answer(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(oa_error(500), oa_error(503, retry_after=0), error(500), oa_error(502), text("back"))
    response = await oa_llm.create(system="s", messages=[{"role": "user", "content": "hello"}])
    assert response.text == "back" and oa_llm.retries == 4 and fake_openai.pending == 0


async def test_a_rejected_key_is_one_error_not_retried(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(oa_error(401, "Incorrect API key provided: sk-bad", code="invalid_api_key"))
    with pytest.raises(LLMError) as caught:
        await oa_llm.create(system="s", messages=[{"role": "user", "content": "hello"}])
    assert caught.value.key_rejected and "\n" not in str(caught.value)
    assert str(caught.value) == "API error 401: Incorrect API key provided: sk-bad"
    assert len(fake_openai.requests) == 1


async def test_context_overflow_is_recognised(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(context_too_long(), oa_error(400, "Input is longer than the maximum context length (8192)"))
    for _ in range(2):
        with pytest.raises(ContextOverflowError):
            await oa_llm.create(system="s", messages=[{"role": "user", "content": "hello"}])
    assert len(fake_openai.requests) == 2


async def test_a_model_without_tools_is_named(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(oa_error(400, "registry.ollama.ai/library/gemma2:2b does not support tools"))
    with pytest.raises(LLMError, match="model gpt-test has no tool calling"):
        await oa_llm.create(system="s", messages=[{"role": "user", "content": "hi"}], tools=[WEATHER_TOOL])


async def test_malformed_tool_arguments_go_back_to_the_model(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    ran: list[ToolCall] = []

    async def execute(call: ToolCall) -> ToolResult:
        ran.append(call)
        return await weather(call)

    fake_openai.queue(
        completion(tool_calls=[("get_weather", '{"city": "Lis')]),
        completion(tool_calls=[("get_weather", '{"city": "Lisbon"}')]),
        text("Sunny."),
    )
    result = await run_tool_loop(
        oa_llm, system="s", messages=[{"role": "user", "content": "weather?"}], tools=[WEATHER_TOOL], execute=execute
    )
    assert result.text == "Sunny." and [c.input for c in ran] == [{"city": "Lisbon"}]
    told = fake_openai.requests[1]["messages"][-1]
    assert told["role"] == "tool" and told["content"].startswith("Error: Tool get_weather was not run")
    assert "not valid JSON" in told["content"]
    replayed = fake_openai.requests[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert replayed == "{}"  # the history stays valid for any provider


async def test_the_anthropic_vocabulary_drives_the_fake_too(oa_llm: LLMClient, fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(tool_use(("get_weather", {"city": "Porto"})), text("Porto: sunny."))
    result = await run_tool_loop(
        oa_llm, system="s", messages=[{"role": "user", "content": "weather?"}], tools=[WEATHER_TOOL], execute=weather
    )
    assert result.text == "Porto: sunny." and result.tool_calls[0].input == {"city": "Porto"}
    assert result.usage.input_tokens > 0  # figures from the body size, as the real API reports them


async def test_llamacpp_is_asked_to_keep_the_prompts_kv_cache_and_others_are_not(fake_openai: FakeOpenAI) -> None:
    """llama.cpp reuses the KV cache of an unchanged prefix when a request says ``cache_prompt``; a server that
    does not know the key must not be sent it."""
    for provider, asked in (("llamacpp", True), ("ollama", False), ("openai_compatible", False)):
        agent = AgentConfig(provider=provider, model="qwen3-8b", base_url=fake_openai.base_url, max_retries=0)
        client = client_for(agent, env={})
        try:
            await client.create(system="s", messages=[{"role": "user", "content": "hi"}])
        finally:
            await client.close()
        assert fake_openai.requests[-1].get("cache_prompt") is (True if asked else None), provider
