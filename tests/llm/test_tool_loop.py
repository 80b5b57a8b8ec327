"""The tool loop against the scripted API: ordering, errors, timeouts, caps, the iteration limit."""

from __future__ import annotations

import asyncio

from teleton.llm import LLMClient, LoopLimits, ToolCall, ToolResult, run_tool_loop
from tests.fakes.anthropic_server import FakeAnthropic, result_text, text, tool_results, tool_use

TOOLS = [{"name": n, "description": n, "input_schema": {"type": "object"}} for n in ("a", "b", "slow", "big")]
USER = [{"role": "user", "content": "go"}]


async def execute(call: ToolCall) -> ToolResult:
    if call.name == "slow":
        await asyncio.Event().wait()  # never finishes: only the tool timeout ends it
    if call.name == "big":
        return ToolResult("x" * 200)
    if call.name == "b":
        raise RuntimeError("b is broken")
    return ToolResult(f"{call.name} ran with {call.input}")


async def test_parallel_calls_answered_in_order(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(tool_use(("a", {"n": 1}), ("b", {}), ("a", {"n": 2}), say="working"), text("done"))
    result = await run_tool_loop(llm, system="s", messages=USER, tools=TOOLS, execute=execute)
    assert result.text == "done"
    assert [c.name for c in result.tool_calls] == ["a", "b", "a"]
    second = fake_api.requests[1]
    calls = [b for b in second["messages"][1]["content"] if b["type"] == "tool_use"]
    results = tool_results(second)
    assert [r["tool_use_id"] for r in results] == [c["id"] for c in calls]
    assert "{'n': 1}" in result_text(results[0]) and "{'n': 2}" in result_text(results[2])
    assert results[1]["is_error"] is True and "b is broken" in result_text(results[1])
    assert len(result.new_messages) == 3  # assistant(tool_use), user(results), assistant(answer)


async def test_timeout_and_output_cap(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(tool_use(("slow", {}), ("big", {})), text("ok"))
    limits = LoopLimits(tool_timeout_s=0.05, output_cap=50)
    await run_tool_loop(llm, system="s", messages=USER, tools=TOOLS, execute=execute, limits=limits)
    slow, big = tool_results(fake_api.requests[1])
    assert slow["is_error"] and "timed out" in result_text(slow)
    assert result_text(big).startswith("x" * 50) and "truncated" in result_text(big)
    assert "x" * 51 not in result_text(big)


async def test_iteration_limit_forces_a_final_answer(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.responder = lambda body: (
        text("giving up") if body.get("tool_choice") == {"type": "none"} else tool_use(("a", {}))
    )
    result = await run_tool_loop(
        llm, system="s", messages=USER, tools=TOOLS, execute=execute, limits=LoopLimits(max_iterations=3)
    )
    assert result.hit_limit and result.text == "giving up"
    assert len(fake_api.requests) == 4
    assert len(result.tool_calls) == 3


async def test_usage_is_summed_and_last_kept(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(tool_use(("a", {})), text("ok"))
    result = await run_tool_loop(llm, system="s", messages=USER, tools=TOOLS, execute=execute)
    assert result.usage.input_tokens > result.last_usage.input_tokens > 0


async def test_prepare_hook_shapes_what_is_sent(llm: LLMClient, fake_api: FakeAnthropic) -> None:
    fake_api.queue(text("ok"))

    def prepare(messages: list[dict]) -> list[dict]:
        return [{"role": "user", "content": "rewritten"}]

    await run_tool_loop(llm, system="s", messages=USER, tools=TOOLS, execute=execute, prepare=prepare)
    assert fake_api.requests[0]["messages"] == [{"role": "user", "content": "rewritten"}]
