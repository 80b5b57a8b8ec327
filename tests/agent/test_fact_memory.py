"""High-salience facts surface in DM context unasked (seeds 001, 002), and never in a group (DESIGN §8)."""

from __future__ import annotations

from teleton.memory.facts import Fact, chat_scope
from tests.agent.conftest import GROUP, Harness
from tests.fakes.anthropic_server import body_text


async def test_salient_facts_reach_the_dm_prompt_but_never_a_group_prompt(harness: Harness) -> None:
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
