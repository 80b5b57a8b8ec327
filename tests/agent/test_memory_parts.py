"""The memory pieces the runtime is built on: masking, the compaction cut, daily logs, facts."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

from teleton.agent.window.compaction import cut_index, is_user_turn, split, truncation_summary
from teleton.agent.window.masking import mask_observations
from teleton.memory.facts.store import Fact, FactStore
from teleton.memory.journal.daily_logs import DailyLogs, exchange_line
from teleton.privacy import group_label as chat_scope
from teleton.storage import Database


def tool_exchange(n: int, *, error: bool = False) -> list[dict]:
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": f"tool{n}", "input": {}}]}
    result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"output {n} " * 20}
    if error:
        result["is_error"] = True
    return [use, {"role": "user", "content": [result]}]


def test_masking_keeps_recent_and_errors() -> None:
    messages: list[dict] = [{"role": "user", "content": "go"}]
    for n in range(15):
        messages += tool_exchange(n, error=(n == 1))
    masked = mask_observations(messages, keep=10)
    results = [m["content"][0] for m in masked if m["role"] == "user" and isinstance(m["content"], list)]
    assert results[0]["content"] == "[Tool: tool0 - OK]"
    assert results[1]["content"].startswith("output 1")  # an error stays whole however old
    assert all(r["content"] == f"[Tool: tool{n} - OK]" for n, r in enumerate(results[:5]) if n != 1)
    assert all(r["content"].startswith(f"output {n + 5}") for n, r in enumerate(results[5:]))
    assert messages[2]["content"][0]["content"].startswith("output 0")  # the input is not mutated
    assert mask_observations(masked, keep=10) == masked


def test_cut_never_splits_a_tool_exchange() -> None:
    messages: list[dict] = []
    for turn in range(30):
        messages.append({"role": "user", "content": f"question {turn}"})
        if turn % 3 == 0:
            messages += tool_exchange(turn)
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {turn}"}]})
    for keep in range(1, 40):
        cut = cut_index(messages, keep)
        old, kept = split(messages, keep)
        assert old + kept == messages
        if cut:
            assert len(kept) >= keep or is_user_turn(kept[0])
            assert is_user_turn(kept[0])
        ids_used = {b["id"] for m in kept if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"}
        ids_answered = {
            b["tool_use_id"]
            for m in kept
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        }
        assert ids_used == ids_answered


def test_truncation_summary_keeps_user_words() -> None:
    old = [{"role": "user", "content": "my flight is on Tuesday"}, {"role": "assistant", "content": "ok"}]
    summary = truncation_summary(old)
    assert "2 earlier messages" in summary and "flight is on Tuesday" in summary


async def test_daily_log_lines(tmp_path: Path) -> None:
    logs = DailyLogs(tmp_path / "memory")
    when = datetime(2026, 11, 21, 14, 5)
    await logs.append_exchange("line one\nline two " + "u" * 300, "reply\n" + "a" * 400, when)
    await logs.append_section("Session summary", "we talked", when)
    text = logs.path_for(date(2026, 11, 21)).read_text()
    first = text.splitlines()[0]
    assert first.startswith("[14:05] User: line one line two u")
    user_part, assistant_part = first.split(" | Assistant: ")
    assert len(user_part) == len("[14:05] User: ") + 200 and len(assistant_part) == 300
    assert "## [14:05] Session summary\nwe talked" in text
    assert exchange_line("a", "b", when) == "[14:05] User: a | Assistant: b"
    assert await logs.tail(date(2026, 11, 21), lines=1) == "we talked"
    assert await logs.recent(today=date(2026, 11, 22)) == [(date(2026, 11, 21), text.strip())]


async def test_facts_dedup_update_scope_and_recall(db: Database) -> None:
    facts = FactStore(db)
    first = await facts.save(Fact("The cat is called Whiskerino", category="pets", key="cat_name"))
    assert first.action == "inserted"
    assert (await facts.save(Fact("the cat is called  WHISKERINO", category="pets"))).action == "duplicate"
    updated = await facts.save(Fact("The cat is called Whiskerino II", category="pets", key="cat_name"))
    assert updated.action == "superseded" and updated.replaced == first.id  # the old name is kept as history
    await facts.save(Fact("Group deadline is Friday", scope=chat_scope(-100), importance=0.9))
    assert await facts.count() == 2
    found = await facts.recall("what is my cat's name?", ["owner"])
    assert [f.value for f in found] == ["The cat is called Whiskerino II"]
    assert found[0].access_count == 0 and (await facts.recall("cat", ["owner"]))[0].access_count == 1
    assert await facts.recall("cat", [chat_scope(-100)]) == []
    assert await facts.recall("deadline", ["owner"]) == []
    assert [f.value for f in await facts.salient([chat_scope(-100)])] == ["Group deadline is Friday"]
    assert await facts.salient(["owner"]) == []
    assert not await facts.remove(updated.id, [chat_scope(-100)])
    assert await facts.remove(updated.id, ["owner"])
    assert await facts.count(["owner"]) == 0
