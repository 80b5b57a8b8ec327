"""The distiller: structured fact extraction, dedup, near-duplicate merge, scope rules, off switch."""

from __future__ import annotations

from pathlib import Path

import structlog

from teleton.agent.distiller import Distiller, Exchange, resolve_scope
from teleton.gateway.contract import ChatInfo
from teleton.llm import LLMClient
from teleton.memory.facts import Fact, FactStore
from teleton.memory.learnings import CORRECTIONS_FILE, Learnings
from teleton.storage import Database
from tests.fakes.anthropic_server import FakeAnthropic, text, tool_use

OWNER_DM = ChatInfo(id=100, type="dm", title="Owner")
GROUP = ChatInfo(id=-500, type="group", title="Hiking club")


def _facts(*items: object):
    return tool_use(("record_facts", {"facts": list(items)}))


def _fact(content: str, scope: str = "user", category: str = "pet", importance: float = 0.6, **extra: object):
    return {"content": content, "category": category, "scope": scope, "importance": importance, **extra}


async def _all_facts(db: Database) -> list[tuple[str, str]]:
    rows = await db.fetchall("select scope, value from facts order by id")
    return [(r[0], r[1]) for r in rows]


async def test_good_duplicate_near_duplicate_and_malformed(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder, tmp_path: Path
) -> None:
    store = FactStore(db, embedder)
    await store.save(Fact("The owner is a nurse in Lisbon", category="work", scope="user"))
    distiller = Distiller(llm, store, Learnings(tmp_path))
    fake_api.queue(
        _facts(
            _fact("The owner's cat is named Whiskerino", key="cat_name", importance=0.9),
            _fact("The owner is a nurse in Lisbon", category="work"),  # exact duplicate
            _fact("The owner works as a nurse in Lisbon", category="work"),  # near duplicate: updates
            {"content": "no scope or importance", "category": "x"},  # malformed
            _fact("", category="pet"),  # malformed: empty content
            "not even an object",  # malformed
        )
    )
    with structlog.testing.capture_logs() as logs:
        stats = await distiller.distill(
            Exchange(OWNER_DM, "Owner", "My cat is Whiskerino. I'm a nurse in Lisbon.", "Noted!", is_owner_dm=True)
        )
    assert stats.saved["user"] == 1
    assert stats.updated["user"] == 1
    assert stats.duplicates == 1
    assert stats.dropped == 3
    facts = await _all_facts(db)
    assert facts == [("user", "The owner works as a nurse in Lisbon"), ("user", "The owner's cat is named Whiskerino")]
    commit = next(e for e in logs if e["event"] == "memory.commit")
    assert commit["saved"] == {"user": 1} and commit["dropped"] == 3
    # The model was asked for structured output through the tool, on the utility model.
    body = fake_api.requests[-1]
    assert body["tool_choice"] == {"type": "tool", "name": "record_facts"}
    assert body["model"] == "claude-test-small"


async def test_group_turn_never_writes_a_user_fact(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder, tmp_path: Path
) -> None:
    distiller = Distiller(llm, FactStore(db, embedder), Learnings(tmp_path))
    fake_api.queue(
        _facts(
            _fact("Mia is allergic to peanuts", scope="user", category="health", importance=0.95),
            _fact("The hike is on Saturday at 8", scope="chat", category="plan"),
            _fact("I was wrong: the meeting point is the north gate", scope="user", category="plan", correction=True),
        )
    )
    await distiller.distill(Exchange(GROUP, "Mia", "I'm allergic to peanuts! hike sat 8", "ok", is_owner_dm=False))
    scopes = {scope for scope, _ in await _all_facts(db)}
    assert scopes == {"chat:-500"}
    assert not (tmp_path / CORRECTIONS_FILE).exists()  # corrections from groups do not reach the DM prompt
    assert resolve_scope("user", GROUP, is_owner_dm=False) == "chat:-500"
    assert resolve_scope("user", ChatInfo(7, "dm"), is_owner_dm=False) == "chat:7"
    assert resolve_scope("user", OWNER_DM, is_owner_dm=True) == "user"


async def test_near_duplicates_do_not_merge_across_scopes(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder, tmp_path: Path
) -> None:
    store = FactStore(db, embedder)
    await store.save(Fact("The owner's cat is named Whiskerino", category="pet", scope="chat:1"))
    fake_api.queue(_facts(_fact("The owner has a cat named Whiskerino")))
    stats = await Distiller(llm, store).distill(Exchange(OWNER_DM, "Owner", "my cat!", "nice", is_owner_dm=True))
    assert stats.saved["user"] == 1
    assert len(await _all_facts(db)) == 2


async def test_owner_correction_goes_to_learnings(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder, tmp_path: Path
) -> None:
    learnings = Learnings(tmp_path)
    fake_api.queue(_facts(_fact("The owner's sister is called Ana, not Anna", category="person", correction=True)))
    stats = await Distiller(llm, FactStore(db, embedder), learnings).distill(
        Exchange(OWNER_DM, "Owner", "No, my sister is Ana, not Anna", "Sorry, noted", is_owner_dm=True)
    )
    assert stats.corrections == 1
    assert "Ana, not Anna" in await learnings.for_prompt()


async def test_off_switches(db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder) -> None:
    store = FactStore(db, embedder)
    message = Exchange(OWNER_DM, "Owner", "my PIN is 1234 #nomem", "ok", is_owner_dm=True)
    assert Distiller(llm, store).schedule(message) is None
    disabled = Distiller(llm, store, enabled=False)
    assert disabled.schedule(Exchange(OWNER_DM, "Owner", "my cat is Tom", "ok", is_owner_dm=True)) is None
    assert fake_api.requests == []


async def test_background_runs_serialised_and_survive_bad_output(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder
) -> None:
    distiller = Distiller(llm, FactStore(db, embedder))
    fake_api.queue(text("I refuse to use tools"), text("still no tool"), text("nope"))
    with structlog.testing.capture_logs() as logs:
        for i in range(3):
            distiller.schedule(Exchange(OWNER_DM, "Owner", f"message {i}", "ok", is_owner_dm=True))
        await distiller.drain()
    assert distiller.totals.dropped == 3
    assert any(e["event"] == "memory.quality_warning" for e in logs)
    assert await _all_facts(db) == []
