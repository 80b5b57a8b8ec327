"""A 200 that is not the API's answer (cut short, a proxy's page, JSON of another shape) is retried like a 5xx,
within the same budget, and its retry's log line carries the start of the body: the real SDKs of both
providers against their scripted servers on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from teleton.llm import LLMClient, LLMError, LLMSettings
from teleton.llm.openai_provider import OpenAIProvider
from tests.fakes.anthropic_server import FakeAnthropic, overloaded, raw, text
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_view import PROVIDERS

HELLO = [{"role": "user", "content": "hello"}]
CUT = '{"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "content": [{"type": "te'
# Valid JSON of shapes neither API answers with; each once per provider.
WRONG_SHAPES = ['{"foo": 1}', "[]", "null", '{"content": "hi", "choices": "hi"}', '{"choices": [{"message": null}]}']
SETTINGS = LLMSettings(model="m", max_retries=3, retry_base_delay_s=0.001, retry_max_delay_s=0.01, request_timeout_s=60)


@pytest.fixture(params=PROVIDERS)
def api(request: pytest.FixtureRequest) -> Iterator[FakeAnthropic | FakeOpenAI]:
    with FakeAnthropic() if request.param == "anthropic" else FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def client(api: FakeAnthropic | FakeOpenAI) -> AsyncIterator[LLMClient]:
    if isinstance(api, FakeOpenAI):
        llm = LLMClient(SETTINGS, provider=OpenAIProvider(api_key="test", base_url=api.base_url), name="openai")
    else:
        llm = LLMClient(SETTINGS, api_key="test", base_url=api.base_url)
    yield llm
    await llm.close()


def retries(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "llm_retry"]


async def test_truncated_json_then_an_answer(client: LLMClient, api: FakeAnthropic, logs: list[dict]) -> None:
    api.queue(raw(CUT), text("Here I am."))
    assert (await client.create(system="s", messages=HELLO)).text == "Here I am."
    [retry] = retries(logs)
    assert retry["reason"].startswith("malformed answer: invalid JSON"), retry
    assert retry["body"] == CUT[:200]  # what came, for whoever reads the log
    assert len(api.requests) == 2 and client.watch.line() is None


@pytest.mark.parametrize("body", WRONG_SHAPES)
async def test_json_of_the_wrong_shape_then_an_answer(
    client: LLMClient, api: FakeAnthropic, logs: list[dict], body: str
) -> None:
    api.queue(raw(body), text("Here I am."))
    assert (await client.create(system="s", messages=HELLO)).text == "Here I am."
    [retry] = retries(logs)
    assert retry["reason"].startswith("malformed answer: "), retry
    assert json.loads(retry["body"]) == json.loads(body), retry  # as the SDK read it back


async def test_a_proxy_page_is_retried_and_named(client: LLMClient, api: FakeAnthropic, logs: list[dict]) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    api.queue(raw(page), text("Here I am."))
    assert (await client.create(system="s", messages=HELLO)).text == "Here I am."
    assert retries(logs)[0]["body"] == page


async def test_malformed_answers_share_the_budget_of_the_other_faults(client: LLMClient, api: FakeAnthropic) -> None:
    api.queue(overloaded(), raw(CUT), raw('{"foo": 1}'), overloaded(), text("too late"))
    with pytest.raises(LLMError, match="unavailable after 4 attempts: 529"):
        await client.create(system="s", messages=HELLO)
    assert len(api.requests) == 4 and api.pending == 1
    assert client.watch.line() is None  # given up for good: no longer "retrying"
