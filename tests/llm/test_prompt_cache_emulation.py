"""The fake APIs' prompt caches (tests/fakes/prompt_cache.py) bill as Anthropic and OpenAI document: the
benchmarks of issue 54 are only as true as these rules. Time is a fake clock the tests move."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from tests.fakes.anthropic_server import FakeAnthropic, text
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.prompt_cache import AutomaticCache, CacheRequestError, PromptCache

CACHE = {"type": "ephemeral"}
BIG = "a stable instruction line. " * 200  # ~5,400 characters: ~1,350 tokens, over the 1,024 minimum


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"the {name} tool", "input_schema": {"type": "object", "properties": {}}}


def request(blocks: int, *, mark: tuple[int, ...] = (), tools: tuple[str, ...] = ("search", "save"),
            ttl: str | None = None, system: str = BIG) -> dict[str, Any]:  # fmt: skip
    """A system block (a breakpoint), then ``blocks`` user blocks; ``mark``: the blocks with a breakpoint too."""
    marker = {**CACHE, "ttl": ttl} if ttl else CACHE
    content: list[dict[str, Any]] = []
    for i in range(blocks):
        block: dict[str, Any] = {"type": "text", "text": f"message block {i} of the conversation"}
        if i in mark:
            block["cache_control"] = marker
        content.append(block)
    return {
        "model": "claude-test",
        "tools": [tool(name) for name in tools],
        "system": [{"type": "text", "text": system, "cache_control": marker}],
        "messages": [{"role": "user", "content": content}],
    }


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(clock: Clock) -> PromptCache:
    return PromptCache(clock=clock)


def test_a_hit_within_the_lookback_reads_the_longest_prefix(cache: PromptCache) -> None:
    first = cache.bill(request(5, mark=(4,)))
    assert first.read == 0 and first.written == first.tokens and first.input == 0
    # 15 blocks later (the breakpoint moved with them): the old tail is 15 boundaries back, in the window.
    second = cache.bill(request(20, mark=(19,)))
    assert second.read == first.tokens
    assert second.written == second.tokens - first.tokens and second.input == 0
    assert second.hit_at == len(first.blocks) - 1


def test_the_marker_is_not_part_of_the_prefix(cache: PromptCache) -> None:
    """A breakpoint that slides to the new last block leaves the bytes before it unchanged."""
    first = cache.bill(request(3, mark=(2,)))
    second = cache.bill(request(4, mark=(3,)))
    assert second.read == first.tokens


def test_a_breakpoint_more_than_20_blocks_past_the_last_entry_misses_it(cache: PromptCache) -> None:
    first = cache.bill(request(1, mark=(0,)))
    system_only = cache.bill(request(1)).read  # the system breakpoint's entry: tools + system
    assert 0 < system_only < first.tokens
    within = PromptCache(clock=cache.clock)
    within.bill(request(1, mark=(0,)))
    assert within.bill(request(21, mark=(20,))).read == first.tokens  # 20 boundaries back: still seen
    beyond = cache.bill(request(22, mark=(21,)))  # 21 back: out of sight, only the system entry is read
    assert beyond.read == system_only and beyond.written == beyond.tokens - system_only


def test_a_prefix_under_the_minimum_is_not_cached(clock: Clock) -> None:
    cache = PromptCache(clock=clock)
    short = request(2, mark=(1,), system="You are Teleton.", tools=())
    for _ in range(2):
        figures = cache.bill(short)
        assert (figures.read, figures.written, figures.input) == (0, 0, figures.tokens)
    haiku = PromptCache(clock=clock, min_tokens=2048)  # ~1,350 tokens: enough for Sonnet, not for a Haiku 3
    assert [haiku.bill(request(2, mark=(1,))).read for _ in range(2)] == [0, 0]
    assert PromptCache(clock=clock).bill(request(2, mark=(1,))).written > 0


def test_an_entry_lives_five_minutes_from_its_last_hit(cache: PromptCache, clock: Clock) -> None:
    body = request(2, mark=(1,))
    full = cache.bill(body).tokens
    clock.now += 299
    assert cache.bill(body).read == full
    clock.now += 299  # 598 s after the write, 299 after the hit that refreshed it
    assert cache.bill(body).read == full
    clock.now += 301
    expired = cache.bill(body)
    assert expired.read == 0 and expired.written == full


def test_an_hour_entry_costs_twice_the_input_to_write_and_outlives_five_minutes(
    cache: PromptCache, clock: Clock
) -> None:
    body = request(2, mark=(1,), ttl="1h")
    first = cache.bill(body)
    assert first.written_1h == first.tokens and first.written_5m == 0
    assert first.billed == 2 * first.tokens
    split = first.usage()["cache_creation"]
    assert split == {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": first.tokens}
    clock.now += 3000
    again = cache.bill(body)
    assert again.read == first.tokens and again.billed == pytest.approx(0.1 * first.tokens)
    clock.now += 3601
    assert cache.bill(body).read == 0


def test_usage_splits_the_request_at_its_last_breakpoint(cache: PromptCache) -> None:
    cache.bill(request(4, mark=(1,)))
    figures = cache.bill(request(4, mark=(1,)))  # blocks 2 and 3 come after the last breakpoint
    assert figures.read > 0 and figures.written == 0 and figures.input > 0
    assert figures.read + figures.input == figures.tokens
    assert figures.billed == pytest.approx(figures.input + 0.1 * figures.read)
    assert figures.usage() == {
        "input_tokens": figures.input, "cache_read_input_tokens": figures.read, "cache_creation_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }  # fmt: skip
    assert figures.breakpoints == 2 and figures.tools_same is True


def test_a_changed_tool_list_misses_everything(cache: PromptCache) -> None:
    first = cache.bill(request(3, mark=(2,)))
    changed = cache.bill(request(3, mark=(2,), tools=("search", "recall", "save")))
    assert changed.read == 0 and changed.written == changed.tokens
    assert changed.tools_same is False and first.tools_same is None


def test_five_breakpoints_are_refused() -> None:
    refusal = r"A maximum of 4 blocks with cache_control may be provided\. Found 5\."
    with pytest.raises(CacheRequestError, match=refusal):
        PromptCache().bill(request(4, mark=(0, 1, 2, 3)))


def test_an_hour_breakpoint_after_a_five_minute_one_is_refused() -> None:
    body = request(2, mark=(1,), ttl="1h")
    body["system"][0]["cache_control"] = CACHE
    with pytest.raises(CacheRequestError, match="1h"):
        PromptCache().bill(body)


def test_the_server_answers_400_and_keeps_its_scripted_reply(clock: Clock) -> None:
    with FakeAnthropic(clock=clock) as fake:
        fake.queue(text("kept for the next request"))
        client = anthropic.Anthropic(api_key="sk-ant-test", base_url=fake.base_url, max_retries=0)
        too_many = request(4, mark=(0, 1, 2, 3))
        with pytest.raises(anthropic.BadRequestError, match="Found 5"):
            client.messages.create(max_tokens=10, **too_many)
        body = request(1, mark=(0,))
        answer = client.messages.create(max_tokens=10, **body)
        assert answer.content[0].text == "kept for the next request"
        assert answer.usage.cache_creation_input_tokens == fake.cache.log[-1].written > 0
        clock.now += 60
        again = client.messages.create(max_tokens=10, **body)
        assert again.usage.cache_read_input_tokens == fake.cache.log[-1].tokens
        assert again.usage.input_tokens == 0 and len(fake.requests) == 3


def chat(messages: int, *, tools: tuple[str, ...] = ("search",), system: str = BIG) -> dict[str, Any]:
    """An OpenAI chat-completions request: the system message, then ``messages`` user messages."""
    return {
        "model": "gpt-test",
        "tools": [{"type": "function", "function": {"name": name, "parameters": {}}} for name in tools],
        "messages": [{"role": "system", "content": system}]
        + [{"role": "user", "content": f"message {i} of the conversation"} for i in range(messages)],
    }


def test_openai_caches_the_exact_beginning_in_steps_of_128_tokens(clock: Clock) -> None:
    cache = AutomaticCache(clock=clock)
    first = cache.bill(chat(1))
    assert first.read == 0 and first.tokens > 1024
    grown = cache.bill(chat(40))  # the first request's prompt is its beginning
    steps = (first.tokens - 1024) // 128
    assert grown.read == 1024 + 128 * steps and grown.input == grown.tokens - grown.read
    assert cache.bill(chat(40, tools=("recall",))).read == 0  # another tool first: nothing matches


def test_openai_caches_nothing_under_1024_tokens_and_forgets_after_five_idle_minutes(clock: Clock) -> None:
    cache = AutomaticCache(clock=clock)
    short = chat(2, system="You are Teleton.")
    assert [cache.bill(short).read for _ in range(2)] == [0, 0]
    cache.bill(chat(1))
    clock.now += 299
    assert cache.bill(chat(1)).read > 0
    clock.now += 301
    assert cache.bill(chat(1)).read == 0


def test_the_openai_server_reports_cached_tokens(clock: Clock) -> None:
    with FakeOpenAI(clock=clock) as fake:
        client = openai.OpenAI(api_key="sk-test", base_url=fake.base_url, max_retries=0)
        body = chat(3)
        client.chat.completions.create(**body)
        again = client.chat.completions.create(**body)
        assert again.usage is not None and again.usage.prompt_tokens_details is not None
        assert again.usage.prompt_tokens_details.cached_tokens == fake.cache.log[-1].read > 1024
