"""Facts as the agent meets them: high-salience facts surface in DM context unasked (seeds 001, 002) and never in
a group (docs/privacy.md); memory_recall's category filter works inside the search."""

from __future__ import annotations

from teleton.memory.facts.store import Fact
from teleton.privacy import group_label as chat_scope
from tests.agent.conftest import GROUP, AgentHarness
from tests.fakes.anthropic_server import body_text, result_text, sequence, text, tool_results, tool_use


async def test_salient_facts_reach_the_dm_prompt_but_never_a_group_prompt(harness: AgentHarness) -> None:
    h = harness
    facts = h.agent.deps.facts
    await facts.save(Fact("Olga is allergic to peanuts", category="health", importance=0.95))
    await facts.save(Fact("Olga's locker code is 7781", category="codes", importance=0.9))
    await facts.save(Fact("Olga's passport expires in June", category="documents", importance=0.85))
    await facts.save(Fact("Olga likes jazz", category="music", importance=0.84))  # just under the threshold
    await facts.save(Fact("The book club votes on Fridays", scope=chat_scope(GROUP.id), importance=0.9))

    start = len(h.fake.requests)
    await h.dm("what should I cook tonight?")
    chat_block = h.main_requests(start)[0]["system"][1]["text"]
    important = chat_block.split("## Important facts\n", 1)[1].split("\n\n", 1)[0]
    assert "[health] Olga is allergic to peanuts" in important and "Olga's locker code is 7781" in important
    assert "passport expires in June" in important  # the threshold (memory.salience_threshold) is inclusive
    assert "jazz" not in important  # under the threshold: recalled when asked, not shown unasked

    start = len(h.fake.requests)
    await h.group("what should we read next?")
    group = h.main_requests(start)[0]
    assert "## Important facts" not in group["system"][1]["text"]
    dump = body_text(group)
    assert "peanuts" not in dump and "7781" not in dump  # neither in the prompt nor in retrieved context


async def test_memory_recall_with_a_category_finds_a_weak_match_behind_thirty_strong_ones(
    harness: AgentHarness,
) -> None:
    h = harness
    for n in range(30):
        await h.agent.deps.facts.save(Fact(f"The team meeting number {n} is on Monday in room {n}", category="work"))
    await h.agent.deps.facts.save(Fact("Rex gets nervous when meeting other dogs", category="pet"))
    h.main = sequence(
        tool_use(("memory_recall", {"query": "team meeting on Monday", "category": "pet"})), text("Rex gets nervous.")
    )
    start = len(h.fake.requests)
    await h.dm("how does my dog handle meetings?")
    results = [r for b in h.main_requests(start) for r in tool_results(b)]
    assert "Rex gets nervous when meeting other dogs" in result_text(results[0])
    assert "room" not in result_text(results[0])
