"""The LLM client against the scripted Messages API: usage, retries, overflow, timeouts."""

from __future__ import annotations

from typing import Any

import pytest

from teleton.llm import ContextOverflowError, LLMClient, LLMError, LLMSettings
from tests.fakes.anthropic_server import FakeAnthropic, error, overloaded, prompt_too_long, text

SYSTEM = [{"type": "text", "text": "You are Teleton.", "cache_control": {"type": "ephemeral"}}]
HELLO = [{"role": "user", "content": "hello"}]


def retry_waits(logs: list[dict[str, Any]]) -> list[float]:
    """The delays the client chose before each retry (its ``llm_retry`` events): asserted instead of timing calls."""
    return [e["wait_s"] for e in logs if e["event"] == "llm_retry"]


async def test_answer_and_usage_figures(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(text("hi there", usage={"input_tokens": 120, "output_tokens": 7, "cache_read_input_tokens": 900}))
    response = await llm.create(system=SYSTEM, messages=HELLO)
    assert response.text == "hi there"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (120, 7)
    assert response.usage.cache_read_tokens == 900
    assert response.usage.prompt_tokens == 1020
    body = fake_api.requests[-1]
    assert body["model"] == "claude-test" and body["max_tokens"] == 512
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}


async def test_cached_prefix_is_read_on_second_request(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    # Over the model's minimum cacheable length (1,024 tokens): a shorter prefix is not cached at all.
    system = [{"type": "text", "text": "You are Teleton. " * 300, "cache_control": {"type": "ephemeral"}}]
    first = await llm.create(system=system, messages=HELLO)
    second = await llm.create(system=system, messages=HELLO)
    assert first.usage.cache_read_tokens == 0 and first.usage.cache_write_tokens > 1024
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens
    assert (await llm.create(system=SYSTEM, messages=HELLO)).usage.cache_write_tokens == 0  # too short to cache


async def test_a_529_storm_ends_in_an_answer(llm: LLMClient, fake_api: FakeAnthropic, logs: list[dict]) -> None:
    fake_api.queue(overloaded(), overloaded(), error(429, retry_after=0.01), error(500), overloaded(), text("made it"))
    response = await llm.create(system=SYSTEM, messages=HELLO)
    assert response.text == "made it"
    assert len(fake_api.requests) == 6
    assert llm.retries == 5
    waits = retry_waits(logs)
    assert len(waits) == 5 and waits[2] == 0.01  # the 429's retry-after wins over the backoff
    assert all(0 <= wait <= 0.5 for wait in waits)  # the configured backoff, capped at retry_max_delay_s


async def test_retry_after_is_honoured(llm: LLMClient, fake_api: FakeAnthropic, logs: list[dict]) -> None:
    fake_api.queue(overloaded(retry_after=0.3), text("ok"))
    assert (await llm.create(system=SYSTEM, messages=HELLO)).text == "ok"
    assert retry_waits(logs) == [0.3]


async def test_retry_after_is_capped(fake_api: FakeAnthropic, logs: list[dict]) -> None:
    settings = LLMSettings(model="m", retry_base_delay_s=0.01, retry_max_delay_s=0.05, request_timeout_s=5)
    client = LLMClient(settings, api_key="test", base_url=fake_api.base_url)
    fake_api.queue(error(429, retry_after=3600), text("ok"))
    assert (await client.create(system="s", messages=HELLO)).text == "ok"
    assert retry_waits(logs) == [0.05]  # not the hour the server asked for
    await client.close()


async def test_gives_up_after_max_retries(fake_api: FakeAnthropic) -> None:
    settings = LLMSettings(model="m", max_retries=2, retry_base_delay_s=0.01, request_timeout_s=5)
    client = LLMClient(settings, api_key="test", base_url=fake_api.base_url)
    fake_api.queue(overloaded(), overloaded(), overloaded(), text("too late"))
    with pytest.raises(LLMError, match="unavailable after 3 attempts"):
        await client.create(system="s", messages=HELLO)
    assert len(fake_api.requests) == 3
    await client.close()


async def test_slow_response_times_out_then_retries(fake_api: FakeAnthropic) -> None:
    settings = LLMSettings(model="m", max_retries=5, retry_base_delay_s=0.01, request_timeout_s=1)
    client = LLMClient(settings, api_key="test", base_url=fake_api.base_url)
    # The first answer stalls far past the request timeout; every later one is immediate, so a retry that
    # itself runs into the timeout on a busy machine only costs another retry.
    fake_api.queue(text("slow", delay=120))
    fake_api.responder = lambda body: text("fast")
    assert (await client.create(system="s", messages=HELLO)).text == "fast"
    assert client.retries >= 1 and len(fake_api.requests) == client.retries + 1
    await client.close()


async def test_prompt_too_long_is_a_context_overflow(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(prompt_too_long())
    with pytest.raises(ContextOverflowError):
        await llm.create(system=SYSTEM, messages=HELLO)
    assert len(fake_api.requests) == 1  # not retried: retrying the same prompt cannot help


async def test_other_bad_requests_are_not_retried(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(error(400, "invalid_request_error", "messages: roles must alternate"))
    with pytest.raises(LLMError, match="roles must alternate"):
        await llm.create(system=SYSTEM, messages=HELLO)


async def test_utility_model_completion(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(text("a summary"))
    assert await llm.complete("summarise this") == "a summary"
    assert fake_api.requests[-1]["model"] == "claude-test-small"


async def test_request_timeout_status_is_retried_auth_is_not(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(error(408, "timeout_error"), text("after 408"))
    assert (await llm.create(system=SYSTEM, messages=HELLO)).text == "after 408"
    fake_api.queue(error(401, "authentication_error", "invalid x-api-key"), text("never"))
    with pytest.raises(LLMError, match="401: invalid x-api-key"):
        await llm.create(system=SYSTEM, messages=HELLO)
    assert fake_api.pending == 1
