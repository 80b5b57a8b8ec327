from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from teleton.llm import LLMClient, LLMSettings
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.model_files import packaged_model
from tests.fakes.anthropic_server import FakeAnthropic


@pytest.fixture(scope="session")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(packaged_model())


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
        max_retries=3,
        retry_base_delay_s=0.01,
        retry_max_delay_s=0.1,
    )
    client = LLMClient(settings, api_key="test", base_url=fake_api.base_url)
    yield client
    await client.close()
