"""The tool loop: ask the model, run the tools it calls, give it the results, until it answers.

The loop knows nothing of which tools exist or who may call them: it gets the tool schemas and an
``execute`` function. It owns the rules every tool call obeys whatever the tool: a timeout, an output cap,
errors returned to the model as ``is_error`` results (never raised), and parallel calls of one response
run and answered in the order the model gave them (a "send A, then send B" must arrive in that order).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from teleton.config.schema import AgentConfig, default
from teleton.llm.client import Block, LLMClient, LLMResponse, Message, Usage
from teleton.llm.progress import WATCHING

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False
    images: tuple[Block, ...] = ()  # image blocks shown with the text (an outside server's pictures)

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(content=message, is_error=True)


Executor = Callable[[ToolCall], Awaitable[ToolResult]]
# Called before each request with the messages about to be sent; returns what is actually sent
# (observation masking hooks in here).
Prepare = Callable[[list[Message]], list[Message]]


@dataclass(frozen=True)
class LoopLimits:
    max_iterations: int = default(AgentConfig, "max_iterations")
    tool_timeout_s: float = default(AgentConfig, "tool_timeout_s")
    output_cap: int = default(AgentConfig, "tool_output_cap")


@dataclass
class LoopResult:
    new_messages: list[Message]  # assistant turns and tool results produced by this loop, in order
    text: str  # the model's final answer text ("" when it only used tools)
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # summed over every request of the loop
    last_usage: Usage = field(default_factory=Usage)  # the final request: how full the window is
    iterations: int = 0
    hit_limit: bool = False

    def called(self, name: str) -> bool:
        return any(call.name == name for call in self.tool_calls)


async def run_tool_loop(
    client: LLMClient,
    *,
    system: Sequence[Block] | str,
    messages: Sequence[Message],
    tools: Sequence[Block],
    execute: Executor,
    limits: LoopLimits = LoopLimits(),
    prepare: Prepare | None = None,
) -> LoopResult:
    history = list(messages)
    result = LoopResult(new_messages=[], text="")
    tool_choice: dict[str, str] | None = None
    progress = WATCHING.get()
    while True:
        outgoing = prepare(history) if prepare else history
        response = await client.create(
            system=system, messages=outgoing, tools=tools, tool_choice=tool_choice, progress=progress
        )
        result.iterations += 1
        result.usage.add(response.usage)
        result.last_usage = response.usage
        assistant = {"role": "assistant", "content": _replayable(response)}
        history.append(assistant)
        result.new_messages.append(assistant)
        calls = [ToolCall(b["id"], b["name"], dict(b.get("input") or {})) for b in response.tool_uses]
        if not calls:
            result.text = response.text
            return result
        results = []
        for call in calls:  # in order: side effects (sends) must happen in the order the model asked
            result.tool_calls.append(call)
            if progress is not None:
                progress.tool(call.name, call.input)
            problem = response.invalid_inputs.get(call.id)
            if problem is None:
                outcome = await run_one(call, execute, limits)
            else:
                log.warning("tool_input_invalid", tool=call.name, problem=problem)
                outcome = ToolResult.error(f"Tool {call.name} was not run: {problem}. Call it again with valid JSON.")
            results.append(_result_block(call, outcome))
        tool_message = {"role": "user", "content": results}
        history.append(tool_message)
        result.new_messages.append(tool_message)
        if tool_choice is not None:
            # The forced final answer still asked for tools; stop without running more of them.
            result.text = response.text
            return result
        if result.iterations >= limits.max_iterations:
            # One last request in which tools may not be called, so the turn ends with an answer and the
            # history stays well-formed (every tool_use answered, roles alternating).
            log.warning("tool_loop_limit", iterations=result.iterations)
            result.hit_limit = True
            tool_choice = {"type": "none"}


async def run_one(call: ToolCall, execute: Executor, limits: LoopLimits) -> ToolResult:
    """Run one tool call under the timeout and output cap; failures become error results."""
    try:
        outcome = await asyncio.wait_for(execute(call), timeout=limits.tool_timeout_s)
    except TimeoutError:
        log.warning("tool_timeout", tool=call.name, timeout_s=limits.tool_timeout_s)
        return ToolResult.error(f"Tool {call.name} timed out after {limits.tool_timeout_s:g} s")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a tool bug must not end the turn: the model is told and can adapt
        log.warning("tool_failed", tool=call.name, error=repr(exc))
        return ToolResult.error(f"Tool {call.name} failed: {type(exc).__name__}: {exc}")
    return cap_output(outcome, limits.output_cap)


def cap_output(outcome: ToolResult, cap: int) -> ToolResult:
    if len(outcome.content) <= cap:
        return outcome
    note = f"\n[output truncated: {len(outcome.content)} characters, showing the first {cap}]"
    return replace(outcome, content=outcome.content[:cap] + note)


def _result_block(call: ToolCall, outcome: ToolResult) -> Block:
    content: str | list[Block] = outcome.content or "(empty)"
    if outcome.images:
        content = [{"type": "text", "text": content}, *outcome.images]
    block: Block = {"type": "tool_result", "tool_use_id": call.id, "content": content}
    if outcome.is_error:
        block["is_error"] = True
    return block


def _replayable(response: LLMResponse) -> list[Block]:
    # Empty text blocks are rejected by the API when sent back; drop them.
    blocks = [b for b in response.content if not (b["type"] == "text" and not b["text"].strip())]
    return blocks or [{"type": "text", "text": "(no answer)"}]
