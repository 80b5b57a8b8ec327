"""A prompt the cache can serve: what a request repeats of the one before is byte for byte the same, from the
start, and the breakpoints sit where the next request reads (docs/memory.md, "What the cache serves").

No clocks and no cache figures: these assert the layout itself, block by block, as the cache compares it
(``tests.fakes.turn_message.prefix_blocks``: tools, system blocks, message blocks, breakpoints left out).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from teleton.agent.deps import AgentSettings
from teleton.storage import Database
from tests.agent.conftest import OWNER, AgentHarness, build_harness
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, tool_results, tool_use
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.prompt_cache import blocks_of
from tests.fakes.turn_message import marks, prefix_blocks, shared_prefix, turn_message

QUESTIONS = ["what do you know about my cat?", "and about the lake cabin?", "thanks, and the garden?"]


def extends(before: Body, after: Body) -> bool:
    """``after`` is ``before`` with more blocks at the end: the cache reads all of ``before``."""
    return shared_prefix(before, after) == len(prefix_blocks(before))


def saving(rounds: int) -> object:
    """A model that saves one fact a request for ``rounds`` requests, then answers."""

    def model(body: Body) -> Reply:
        done = sum(1 for m in body["messages"] if m["role"] == "user" and tool_results({"messages": [m]}))
        if done >= rounds or "save" not in turn_message(body).typed:
            return text("done")
        return tool_use(("memory_save", {"value": f"fact number {done} of {turn_message(body).typed}"}))

    return model


async def test_consecutive_turns_share_the_prefix_up_to_the_history_breakpoint(harness: AgentHarness) -> None:
    h = harness
    (h.workspace / "MEMORY.md").write_text("Olga keeps bees.")
    for question in QUESTIONS:
        await h.dm(question)
    bodies = h.main_requests()
    tools_and_system = len(bodies[0]["tools"]) + len(bodies[0]["system"])
    for before, after in itertools.pairwise(bodies):
        history_mark = marks(before)[2] if len(marks(before)) == 4 else tools_and_system - 1
        # What the next turn starts with is what this one marked for it: tools, system, the stored history.
        assert shared_prefix(before, after) == history_mark + 1
        assert before["tools"] == after["tools"] and before["system"] == after["system"]
    # The turn's own message carries the note and is stored without it: the next request re-sends it bare.
    stored = [m for m in bodies[-1]["messages"] if m["role"] == "user"][:-1]
    assert [json.dumps(m["content"]) for m in stored] == [json.dumps(q) for q in QUESTIONS[:-1]]
    assert all("## Now" in turn_message(b).note for b in bodies)


async def test_a_tool_loop_follow_up_extends_the_request_before_it(harness: AgentHarness) -> None:
    h = harness
    h.main = saving(3)
    await h.dm("please save three facts about the cabin")
    bodies = h.main_requests()
    assert len(bodies) == 4
    for before, after in itertools.pairwise(bodies):
        assert extends(before, after)
        assert marks(after)[-1] == len(prefix_blocks(after)) - 1  # the last block marked: the next one reads it


async def test_no_request_carries_more_than_four_breakpoints_and_each_is_where_it_is_read(
    harness: AgentHarness,
) -> None:
    h = harness
    h.main = saving(2)
    for question in ["hello", "save two facts about bees", "and what now?"]:
        await h.dm(question)
    bodies = h.main_requests()
    tools = len(bodies[0]["tools"])
    for body in bodies:
        found = marks(body)
        assert len(found) <= 4
        assert found[:2] == [tools, tools + 1]  # identity, then the chat block
        assert found[-1] == len(prefix_blocks(body)) - 1  # the request's last block
    # From the second turn on, the stored history's last message is marked too: the next turn reads there.
    later = bodies[-1]
    history = [m for m in later["messages"]][:-1]
    history_end = tools + 2 + sum(1 if isinstance(m["content"], str) else len(m["content"]) for m in history) - 1
    assert marks(later) == [tools, tools + 1, history_end, len(prefix_blocks(later)) - 1]


async def test_masking_rewrites_the_history_only_at_its_steps(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    settings = AgentSettings(session_reset_hour=None, session_idle_minutes=None, masking_keep=2, masking_step=3)
    h = await build_harness(tmp_path, db, fake_api, settings)
    h.main = saving(7)
    await h.dm("save seven facts about bees")
    bodies = h.main_requests()
    assert len(bodies) == 8  # requests holding 0, 1, ..., 7 results
    broke = [n for n, (before, after) in enumerate(itertools.pairwise(bodies), 1) if not extends(before, after)]
    assert broke == [5]  # 5 held = keep 2 + step 3: masked down to 2, once; every other request extends the last
    masked = [b for m in bodies[5]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert [b["content"] for b in masked if b.get("type") == "tool_result"][:3] == ["[Tool: memory_save - OK]"] * 3
    # The first rewritten block is the oldest result: nothing before it changed.
    first_result = next(i for i, block in enumerate(blocks_of(bodies[5])) if block.label.endswith("tool_result"))
    assert shared_prefix(bodies[4], bodies[5]) == first_result
    await h.llm.close()


async def test_an_edit_of_memory_md_breaks_the_prefix_at_the_chat_block_and_nowhere_earlier(
    harness: AgentHarness,
) -> None:
    h = harness
    (h.workspace / "MEMORY.md").write_text("Olga keeps bees.")
    await h.dm(QUESTIONS[0])
    (h.workspace / "MEMORY.md").write_text("Olga keeps bees and two goats.")
    await h.dm(QUESTIONS[1])
    before, after = h.main_requests()
    assert shared_prefix(before, after) == len(before["tools"]) + 1  # tools and identity still read


async def test_a_change_of_the_allowed_tools_breaks_the_prefix_at_that_tool(harness: AgentHarness) -> None:
    h = harness
    await h.dm(QUESTIONS[0])
    names = [tool["name"] for tool in h.main_requests()[0]["tools"]]
    gone = names[len(names) // 2]
    h.agent.deps.registry.set_override(gone, enabled=False)
    await h.dm(QUESTIONS[1])
    before, after = h.main_requests()
    assert [tool["name"] for tool in after["tools"]] == [n for n in names if n != gone]
    assert shared_prefix(before, after) == names.index(gone)  # the tools before it are the same bytes


async def test_openai_requests_repeat_the_last_turn_in_the_same_order(
    tmp_path: Path, db: Database, fake_openai: FakeOpenAI
) -> None:
    """OpenAI caches a repeated prefix by itself, and local servers reuse its KV cache: the same layout."""
    h = await build_harness(tmp_path, db, fake_openai)
    for question in QUESTIONS:
        await h.dm(question)
    raw = [b for b in fake_openai.requests if b["model"] == "claude-test"]
    assert len(raw) == 3
    for before, after in itertools.pairwise(raw):
        assert after["tools"] == before["tools"] and after["messages"][0] == before["messages"][0]
        history = before["messages"][:-1]  # system and the stored history: sent again as they were
        assert after["messages"][: len(history)] == history
        assert "cache_control" not in json.dumps(after)
    assert (await h.agent.sessions.active(OWNER.id)) is not None
    await h.llm.close()
