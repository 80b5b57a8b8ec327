"""End-to-end turns on each provider: the same scripted model behind the Messages API and behind an
OpenAI-compatible endpoint (``any_harness`` runs every test once per provider, each through its real SDK)."""

from __future__ import annotations

from tests.agent.conftest import MAIN_MODEL, OWNER_DM, AgentHarness
from tests.fakes.anthropic_server import Body, Reply, error, overloaded, text, tool_use
from tests.fakes.openai_server import results, said
from tests.fakes.openai_view import FakeOpenAIInAnthropicTerms


async def test_a_plain_dm_is_answered(any_harness: AgentHarness) -> None:
    h = any_harness
    h.main = lambda body: text(f"You said: {said(body)}")
    assert await h.dm("good morning") == "You said: good morning"
    assert h.gateway.sent[-1].chat_id == OWNER_DM.id
    if isinstance(h.fake, FakeOpenAIInAnthropicTerms):  # the wire carried OpenAI's format, not the view
        raw = h.fake.raw_requests[-1]
        assert raw["messages"][0]["role"] == "system" and raw["tools"][0]["type"] == "function"
    session = await h.agent.sessions.active(OWNER_DM.id)
    answer = {"role": "assistant", "content": [{"type": "text", "text": "You said: good morning"}]}
    assert session.messages[-1] == answer


async def test_memory_save_then_recall(any_harness: AgentHarness) -> None:
    h = any_harness

    def model(body: Body) -> Reply:
        done = results(body)
        if done:
            return text(f"Done: {done[0][:60]}")
        if "my cat" in said(body):
            return tool_use(("memory_save", {"value": "Olga's cat is called Whiskerino", "category": "pet"}))
        return tool_use(("memory_recall", {"query": "cat name"}))

    h.main = model
    saved = await h.dm("remember: my cat is called Whiskerino")
    assert saved is not None and saved.startswith("Done:")
    await h.dm("/new")
    start = len(h.fake.requests)
    await h.dm("what was the name again?")
    recalled = [r for b in h.main_requests(start) for r in results(b)]
    assert recalled and "Whiskerino" in recalled[0]
    assert h.gateway.sent[-1].text.startswith("Done:")


async def test_an_api_outage_ends_in_a_reply(any_harness: AgentHarness) -> None:
    h = any_harness
    h.fake.queue(error(500), overloaded(0.01), error(503), overloaded(), text("Here I am."))
    assert await h.dm("are you there? please answer") == "Here I am."
    assert h.llm.retries == 4 and h.fake.pending == 0
    assert all(b["model"] == MAIN_MODEL for b in h.fake.requests)


async def test_the_model_down_gets_an_apology(any_harness: AgentHarness) -> None:
    h = any_harness
    h.fake.queue(*[error(500) for _ in range(6)])
    reply = await h.dm("are you there? please answer")
    assert reply is not None and "can't reach" in reply
    session = await h.agent.sessions.active(OWNER_DM.id)
    assert session.messages == []
