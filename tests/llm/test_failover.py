"""Issue 16's failover, utility provider and spend, end to end: the real SDKs against a fake Messages API
(the primary) and a fake OpenAI-compatible server (the fallback or the utility provider), the client built
from the config as the daemon builds it, the cool-down driven by an injected clock instead of waiting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teleton.agent.distiller import Distiller
from teleton.config.schema import AgentConfig
from teleton.llm import LLMClient
from teleton.llm.connect import client_for
from teleton.storage import Database
from tests.agent.conftest import MAIN_MODEL, UTILITY_MODEL, AgentHarness, build_harness
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, error, overloaded, text
from tests.fakes.openai_server import FakeOpenAI, said

FAST_RETRIES = {"max_retries": 2, "retry_base_delay_s": 0.001, "retry_max_delay_s": 0.01}


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def client(primary: FakeAnthropic, clock: Clock | None = None, **agent: Any) -> LLMClient:
    values = {"api_key": "test", "base_url": primary.base_url, "model": MAIN_MODEL, "utility_model": UTILITY_MODEL}
    return client_for(AgentConfig(**{**values, **agent}), env={}, clock=clock, **FAST_RETRIES)


def fallback_to(fake: FakeOpenAI) -> list[dict[str, str]]:
    return [{"provider": "openai_compatible", "model": "gpt-test", "base_url": fake.base_url, "api_key": "k"}]


async def test_a_529_storm_is_answered_by_the_fallback_until_the_primary_recovers(tmp_path: Path, db: Database) -> None:
    clock = Clock()
    with FakeAnthropic() as primary, FakeOpenAI() as fallback:
        llm = client(primary, clock, fallbacks=fallback_to(fallback), failover_retry_s=60)
        h = await build_harness(tmp_path, db, primary, llm=llm)
        down = True

        def primary_model(body: Body) -> Reply:
            return overloaded() if down else text(f"Primary: {said(body)}")

        primary.responder = primary_model
        fallback.responder = lambda body: text(f"Fallback: {said(body)}")
        try:
            # The primary's retries run out (3 attempts of 529), the fallback answers the same request.
            assert await h.dm("hello") == "Fallback: hello"
            assert len(primary.requests) == 3
            assert [b["model"] for b in fallback.requests] == ["gpt-test"]
            status = await h.dm("/status")
            assert status is not None
            assert "Failover: answering with openai_compatible (gpt-test) since " in status
            assert "because " in status and "primary (anthropic) retried every 60 s" in status

            # Within the cool-down the primary is left alone: the fallback answers at once.
            assert await h.dm("still there?") == "Fallback: still there?"
            assert len(primary.requests) == 3

            # After the cool-down, still down: one probe (no retries), then the fallback again.
            clock.now += 60
            assert await h.dm("and now?") == "Fallback: and now?"
            assert len(primary.requests) == 4

            # Recovered: after the next cool-down the primary answers and takes over again.
            down = False
            clock.now += 59
            assert await h.dm("before the cool-down") == "Fallback: before the cool-down"
            assert len(primary.requests) == 4
            clock.now += 1
            answered_by_fallback = len(fallback.requests)
            assert await h.dm("back?") == "Primary: back?"
            assert len(primary.requests) == 5 and len(fallback.requests) == answered_by_fallback
            assert await h.dm("and stays") == "Primary: and stays"
            assert "Failover" not in (await h.dm("/status") or "")
        finally:
            await llm.close()


async def test_a_rejected_key_does_not_fail_over(tmp_path: Path, db: Database) -> None:
    with FakeAnthropic() as primary, FakeOpenAI() as fallback:
        llm = client(primary, fallbacks=fallback_to(fallback))
        h = await build_harness(tmp_path, db, primary, llm=llm)
        primary.responder = lambda body: error(401, "authentication_error", "invalid x-api-key")
        try:
            reply = await h.dm("hello")
            assert reply is not None and "rejected my API key" in reply and "\n" not in reply
            assert len(primary.requests) == 1 and fallback.requests == []
            assert "Failover" not in (await h.dm("/status") or "")
        finally:
            await llm.close()


async def test_distillation_goes_to_the_utility_provider(tmp_path: Path, db: Database) -> None:
    with FakeAnthropic() as main, FakeOpenAI() as utility:
        llm = client(main, utility_provider="openai_compatible", utility_base_url=utility.base_url, utility_api_key="k")
        h = await build_harness(tmp_path, db, main, llm=llm)
        utility.responder = h.respond  # the utility script: record_facts with no facts
        distiller = h.agent.deps.distiller = Distiller(h.llm, h.agent.deps.facts)
        try:
            h.main = lambda body: text("Noted.")
            assert await h.dm("my sister lives in Porto") == "Noted."
            await distiller.drain()
            assert [b["model"] for b in main.requests] == [MAIN_MODEL]
            assert utility.requests and {b["model"] for b in utility.requests} == {UTILITY_MODEL}
            assert "record_facts" in str(utility.requests[0]["tools"])
        finally:
            await llm.close()


def usage(input_: int, output: int, cache_read: int = 0) -> dict[str, int]:
    return {
        "input_tokens": input_,
        "output_tokens": output,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": 0,
    }


async def status_of(h: AgentHarness) -> str:
    status = await h.dm("/status")
    assert status is not None
    return status


async def test_status_shows_the_spend_at_the_preset_price(tmp_path: Path, db: Database) -> None:
    with FakeAnthropic() as fake:
        llm = client(fake, model="claude-sonnet-4-6")  # $3 in, $15 out, $0.30 cache reads per 1M
        h = await build_harness(tmp_path, db, fake, llm=llm)
        try:
            h.main = lambda body: text("one", usage=usage(100_000, 20_000, 400_000))  # 0.30 + 0.30 + 0.12
            await h.dm("first")
            assert "- Spend: $0.7200 this session, $0.7200 last turn" in await status_of(h)
            h.main = lambda body: text("two", usage=usage(200_000, 10_000))  # 0.60 + 0.15
            await h.dm("second")
            assert "- Spend: $1.47 this session, $0.7500 last turn" in await status_of(h)
        finally:
            await llm.close()


async def test_a_configured_price_wins_and_a_local_model_costs_nothing(tmp_path: Path, db: Database) -> None:
    with FakeAnthropic() as fake:
        price = {"input": 1.0, "output": 2.0, "cache_read": 0.5}
        llm = client(fake, model="claude-sonnet-4-6", price_per_mtok=price)
        h = await build_harness(tmp_path, db, fake, llm=llm)
        try:
            h.main = lambda body: text("one", usage=usage(1_000_000, 1_000_000, 1_000_000))
            await h.dm("first")
            assert "- Spend: $3.50 this session, $3.50 last turn" in await status_of(h)
        finally:
            await llm.close()
    with FakeOpenAI() as local:
        llm = client_for(AgentConfig(provider="ollama", model="qwen3:8b", base_url=local.base_url), env={})
        h = await build_harness(tmp_path, db, local, llm=llm)
        try:
            await h.dm("hi")
            assert "- Spend: none (a local model)" in await status_of(h)
        finally:
            await llm.close()


async def test_an_unknown_model_shows_no_spend(tmp_path: Path, db: Database) -> None:
    with FakeOpenAI() as fake:
        agent = AgentConfig(provider="openai_compatible", model="mystery-1", base_url=fake.base_url, api_key="k")
        llm = client_for(agent, env={})
        h = await build_harness(tmp_path, db, fake, llm=llm)
        try:
            await h.dm("hi")
            assert "Spend" not in await status_of(h)
        finally:
            await llm.close()
