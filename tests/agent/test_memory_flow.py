"""Memory across boundaries: /new and restarts, compaction of a long session, masking, resets."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

from teleton.agent.runtime import AgentSettings
from teleton.agent.window.compaction import Thresholds
from teleton.llm.types import sendable
from teleton.storage import Database
from tests.agent.conftest import OWNER, OWNER_DM, AgentHarness, build_harness
from tests.fakes.anthropic_server import (
    Body,
    FakeAnthropic,
    Reply,
    error,
    result_text,
    sequence,
    system_text,
    text,
    tool_results,
    tool_use,
    user_said,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.turn_message import turn_message, unmarked


def today_log(h: AgentHarness) -> str:
    path = h.workspace / "memory" / f"{datetime.now().astimezone():%Y-%m-%d}.md"
    return path.read_text() if path.exists() else ""


def whiskerino_model(body: Body) -> Reply:
    """Saves what it is told, and recalls before answering a question about the user."""
    results = tool_results(body)
    if results:
        found = re.search(r"named (\w+)", result_text(results[0]))
        return text(f"Your cat is called {found.group(1)}." if found else "I don't know your cat's name.")
    said = user_said(body)
    if said.startswith("My cat's name is"):
        name = said.rsplit(" ", 1)[1].strip(".")
        return tool_use(
            (
                "memory_save",
                {"value": f"The user's cat is named {name}", "category": "pets", "key": "cat_name", "importance": 0.7},
            ),
            say="Noted!",
        )
    if "cat's name?" in said:
        return tool_use(("memory_recall", {"query": "user's cat name"}))
    return text("ok")


async def test_whiskerino_survives_new_and_a_restart(tmp_path: Path, any_api: FakeAnthropic | FakeOpenAI) -> None:
    fake_api = any_api
    db = await Database.open(tmp_path / "teleton.db")
    h = await build_harness(tmp_path, db, fake_api)
    h.main = whiskerino_model
    await h.dm("My cat's name is Whiskerino.")
    first = await h.agent.sessions.active(OWNER.id)
    assert "Started a new conversation" in await h.dm("/new")
    assert "Saved fact\n[pets] The user's cat is named Whiskerino" in today_log(h)
    # The daemon stops ...
    await h.llm.close()
    await db.close()

    # ... and starts again: new database handle, new agent, nothing carried in memory.
    db = await Database.open(tmp_path / "teleton.db")
    h = await build_harness(tmp_path, db, fake_api)
    h.main = whiskerino_model
    start = len(fake_api.requests)
    assert await h.dm("What is my cat's name?") == "Your cat is called Whiskerino."
    second = await h.agent.sessions.active(OWNER.id)
    assert second.id != first.id and second.messages[0]["content"] == "What is my cat's name?"
    recall = [b for b in fake_api.requests[start:] if tool_results(b)]
    assert "Whiskerino" in result_text(tool_results(recall[0])[0])
    # Also in front of the model from the first request on: today's log is in the DM turn's note.
    assert "Whiskerino" in turn_message(fake_api.requests[start]).logs
    await h.llm.close()
    await db.close()


async def seed_long_session(h: AgentHarness, pairs: int) -> list[dict]:
    messages: list[dict] = []
    for i in range(pairs):
        messages.append({"role": "user", "content": f"question {i}: tell me about topic {i}"})
        if i % 10 == 0:
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"tu{i}", "name": "memory_recall", "input": {"query": f"topic {i}"}}
                    ],
                }
            )
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"tu{i}", "content": "No matching facts."}],
                }
            )
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]})
    session = await h.agent.sessions.create(OWNER.id, messages=messages)
    return session.messages


async def test_a_250_message_session_is_compacted(any_harness: AgentHarness) -> None:
    h = any_harness
    old = await seed_long_session(h, 113)  # 226 + 24 tool messages = 250
    assert len(old) == 250
    old_id = (await h.agent.sessions.active(OWNER.id)).id

    def facts(body: Body) -> Reply:
        prompt = body["messages"][-1]["content"]
        if "Extract the durable facts" in prompt:
            return tool_use(
                (
                    "record_facts",
                    {
                        "facts": [
                            {
                                "category": "topics",
                                "key": "favourite",
                                "scope": "user",
                                "content": "The user likes topic 7",
                                "importance": 0.5,
                            }
                        ]
                    },
                )
            )
        return text("Summary: the user asked about topics 0 to 103, one at a time.")

    h.utility = facts
    start = len(h.fake.requests)
    assert await h.dm("and what about topic 999?") == "ok"
    new = await h.agent.sessions.active(OWNER.id)
    assert new.id != old_id
    kept = old[-20:]
    assert new.messages[:20] == kept  # the last 20 intact (this cut falls on a user turn)
    assert sendable(new.messages[20]) == {"role": "user", "content": "and what about topic 999?"}
    assert new.summary.startswith("Summary: the user asked about topics")
    row = await h.db.fetchone("select active, end_reason, summary from sessions where id = ?", (old_id,))
    assert (row["active"], row["end_reason"]) == (0, "compacted") and row["summary"] == new.summary
    # Write-then-compact: the fact was saved before the summary, the summary is in the log and the KB.
    requests = h.fake.requests[start:]
    kinds = ["facts" if "Extract the durable" in json.dumps(b) else b["model"] for b in requests]
    assert kinds == ["facts", "claude-test-small", "claude-test"]
    assert [f.value for f in await h.agent.deps.facts.recall("topic 7", ["owner"])] == ["The user likes topic 7"]
    log = today_log(h)
    assert "Session compacted (compacted)\nSummary: the user asked about topics" in log
    kb = await h.db.fetchone("select source, text from knowledge where source = 'session'")
    assert kb["text"] == new.summary
    main = requests[-1]
    assert unmarked(main["messages"][:20]) == kept
    assert "Summary: the user asked about topics" in system_text(main)


async def test_compaction_falls_back_to_truncation_when_the_model_fails(any_harness: AgentHarness) -> None:
    h = any_harness
    await seed_long_session(h, 100)
    h.utility = lambda body: error(500)
    await h.dm("still there?")
    new = await h.agent.sessions.active(OWNER.id)
    assert new.summary.startswith("[") and "earlier messages were dropped" in new.summary
    assert "question 79: tell me about topic 79" in new.summary
    assert "earlier messages were dropped without a summary" in today_log(h)
    assert len(new.messages) >= 22 and new.messages[0]["content"].startswith("question ")


async def test_old_tool_results_are_masked_in_what_the_model_gets(any_harness: AgentHarness) -> None:
    h = any_harness
    rounds = iter(range(7))

    def model(body: Body) -> Reply:
        n = next(rounds, None)
        if n is None:
            return text("done")
        calls = [("memory_save", {"value": f"fact number {3 * n + i} is worth keeping"}) for i in range(3)]
        if n == 1:  # the fourth result overall is an error: an invalid call
            calls[0] = ("memory_recall", {"query": 5})
        return tool_use(*calls)

    h.main = model
    await h.dm("save twenty facts please")
    last = h.fake.requests[-1]
    results = [
        b
        for m in last["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert len(results) == 21
    # 21 held is past masking_keep + masking_step (10 + 10): the oldest 10 are masked, in one step.
    contents = [r["content"] for r in results]
    assert contents[0] == contents[1] == contents[2] == "[Tool: memory_save - OK]"
    assert results[3]["is_error"] and "Invalid input" in contents[3]  # errors stay whole
    assert all(c == "[Tool: memory_save - OK]" for c in contents[4:10])
    assert all(c.startswith("Saved.") for c in contents[10:])  # the 11 most recent stay whole
    stored = (await h.agent.sessions.active(OWNER.id)).messages
    assert sum(json.dumps(m).count("[Tool: memory_save - OK]") for m in stored) == 9


async def test_soft_threshold_flushes_memory_once(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> None:
    settings = AgentSettings(
        session_reset_hour=None,
        session_idle_minutes=None,
        thresholds=Thresholds(context_window=8000),
    )
    h = await build_harness(tmp_path, db, fake_api, settings)
    lisbon = {"category": "travel", "content": "Flight to Lisbon on May 3", "scope": "user", "importance": 0.6}
    h.utility = lambda body: (
        tool_use(("record_facts", {"facts": [lisbon]}))
        if "Extract the durable" in body["messages"][-1]["content"]
        else text("summary")
    )
    h.main = sequence(text("ok", usage={"input_tokens": 4500, "output_tokens": 10}))  # over half the window
    await h.dm("I fly to Lisbon on May 3rd")
    start = len(fake_api.requests)
    await h.dm("ok so what now?")
    first_main = h.main_requests(start)[0]
    assert "## Memory flush" in turn_message(first_main).note
    assert "Memory flush\n- [travel] Flight to Lisbon on May 3" in today_log(h)
    start = len(fake_api.requests)
    await h.dm("anything else?")
    assert "## Memory flush" not in turn_message(h.main_requests(start)[0]).note
    await h.llm.close()


async def test_idle_and_daily_reset_end_the_session_with_a_summary(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    settings = AgentSettings(session_reset_hour=None, session_idle_minutes=30)
    h = await build_harness(tmp_path, db, fake_api, settings)
    await h.dm("we planned the garden party for Saturday")
    old = await h.agent.sessions.active(OWNER_DM.id)
    await db.execute("update sessions set updated_at = ? where id = ?", (time.time() - 3600, old.id))
    await h.dm("hello again, it's been a while")
    new = await h.agent.sessions.active(OWNER_DM.id)
    assert new.id != old.id and len(new.messages) == 2
    row = await db.fetchone("select end_reason, summary from sessions where id = ?", (old.id,))
    assert row["end_reason"] == "idle" and "garden party" in row["summary"]
    assert "Session ended (idle)" in today_log(h)

    h.agent.settings = AgentSettings(session_reset_hour=datetime.now().hour, session_idle_minutes=None)
    await db.execute("update sessions set updated_at = ? where id = ?", (time.time() - 3700, new.id))
    await h.dm("good morning")
    row = await db.fetchone("select end_reason from sessions where id = ?", (new.id,))
    assert row["end_reason"] == "daily-reset"
    await h.llm.close()


async def test_exchanges_feed_the_distiller_and_tool_errors_the_learnings(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    from teleton.agent.distiller import Distiller
    from teleton.memory.journal.learnings import Learnings

    h = await build_harness(tmp_path, db, fake_api)
    learnings = Learnings(h.workspace)
    distiller = Distiller(h.llm, h.agent.deps.facts, learnings)
    h.agent.deps.distiller = distiller
    h.agent.deps.learnings = learnings
    h.agent.prompt.learnings = learnings

    def utility(body: Body) -> Reply:
        if body.get("tools") and body["tools"][0]["name"] == "record_facts":
            return tool_use(
                (
                    "record_facts",
                    {
                        "facts": [
                            {
                                "content": "Olga is allergic to peanuts",
                                "category": "health",
                                "scope": "user",
                                "importance": 0.95,
                            }
                        ]
                    },
                )
            )
        return text("[]")

    h.utility = utility
    h.main = sequence(tool_use(("memory_recall", {})), text("noted"))
    await h.dm("I'm allergic to peanuts, by the way")
    await distiller.drain()
    facts = await h.agent.deps.facts.recall("peanuts", ["owner"])
    assert [f.value for f in facts] == ["Olga is allergic to peanuts"]
    start = len(fake_api.requests)
    await h.dm("what should I cook tonight?")
    system = h.main_requests(start)[0]["system"]
    assert "Past tool errors" in system[1]["text"] and "memory_recall" in system[1]["text"]
    assert "Olga is allergic to peanuts" in system[1]["text"]  # high salience: surfaces unasked
    await h.agent.shutdown()
    await h.llm.close()


async def test_sweep_ends_idle_sessions_without_waiting_for_a_message(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    settings = AgentSettings(session_reset_hour=None, session_idle_minutes=30)
    h = await build_harness(tmp_path, db, fake_api, settings)
    await h.dm("the plumber comes on Thursday at 9")
    await h.group("book club moved to the library")
    assert await h.agent.scheduled.sweep_sessions() == 0
    await db.execute("update sessions set updated_at = ?", (time.time() - 3600,))
    assert await h.agent.scheduled.sweep_sessions() == 2
    assert await h.agent.sessions.active(OWNER.id) is None
    log = today_log(h)
    assert log.count("Session ended (idle)") == 2 and "plumber comes on Thursday" in log
    await h.llm.close()
