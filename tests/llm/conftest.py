from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from teleton.llm import LLMClient, LLMSettings
from tests.fakes.anthropic_server import FakeAnthropic


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def llm(fake_api: FakeAnthropic) -> AsyncIterator[LLMClient]:
    settings = LLMSettings(
        model="claude-test",
        utility_model="claude-test-small",
        max_tokens=512,
        request_timeout_s=5,
        max_retries=6,
        retry_base_delay_s=0.01,
        retry_max_delay_s=0.5,
    )
    client = LLMClient(settings, api_key="test", base_url=fake_api.base_url)
    yield client
    await client.close()
