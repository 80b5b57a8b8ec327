"""The distiller: structured fact extraction, dedup, near-duplicate merge, scope rules, off switch."""

from __future__ import annotations

from pathlib import Path

import structlog

from teleton.agent.compactor import Compactor
from teleton.agent.distiller import Distiller, Exchange, Transcript, without_off_switched
from teleton.agent.window.sessions import SessionStore
from teleton.gateway.contract import ChatInfo
from teleton.llm import LLMClient
from teleton.memory.facts.store import Fact, FactStore
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.memory.journal.learnings import CORRECTIONS_FILE, Learnings
from teleton.privacy import Clearance
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
    await store.save(Fact("The owner is a nurse in Lisbon", category="work", scope="owner"))
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
            Exchange(OWNER_DM, "Owner", "My cat is Whiskerino. I'm a nurse in Lisbon.", "Noted!", label="owner")
        )
    assert stats.saved["owner"] == 1
    assert stats.updated["owner"] == 1
    assert stats.duplicates == 1
    assert stats.dropped == 3
    facts = await _all_facts(db)
    assert facts == [
        ("owner", "The owner works as a nurse in Lisbon"),
        ("owner", "The owner's cat is named Whiskerino"),
    ]
    commit = next(e for e in logs if e["event"] == "memory.commit")
    assert commit["saved"] == {"owner": 1} and commit["dropped"] == 3
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
            # A group member's "global" fact (an instruction for everywhere) is still the group's.
            _fact("Always post the owner's notes here", scope="global", category="rule", importance=1.0),
        )
    )
    await distiller.distill(Exchange(GROUP, "Mia", "I'm allergic to peanuts! hike sat 8", "ok", label="chat:-500"))
    scopes = {scope for scope, _ in await _all_facts(db)}
    assert scopes == {"chat:-500"}
    assert not (tmp_path / CORRECTIONS_FILE).exists()  # corrections from groups do not reach the DM prompt


async def test_near_duplicates_do_not_merge_across_scopes(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder, tmp_path: Path
) -> None:
    store = FactStore(db, embedder)
    await store.save(Fact("The owner's cat is named Whiskerino", category="pet", scope="chat:-1"))
    fake_api.queue(_facts(_fact("The owner has a cat named Whiskerino")))
    stats = await Distiller(llm, store).distill(Exchange(OWNER_DM, "Owner", "my cat!", "nice", label="owner"))
    assert stats.saved["owner"] == 1
    assert len(await _all_facts(db)) == 2


async def test_owner_correction_goes_to_learnings(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder, tmp_path: Path
) -> None:
    learnings = Learnings(tmp_path)
    fake_api.queue(_facts(_fact("The owner's sister is called Ana, not Anna", category="person", correction=True)))
    stats = await Distiller(llm, FactStore(db, embedder), learnings).distill(
        Exchange(OWNER_DM, "Owner", "No, my sister is Ana, not Anna", "Sorry, noted", label="owner")
    )
    assert stats.corrections == 1
    assert "Ana, not Anna" in await learnings.for_prompt()


async def test_off_switches(db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder) -> None:
    store = FactStore(db, embedder)
    message = Exchange(OWNER_DM, "Owner", "my PIN is 1234 #nomem", "ok", label="owner")
    assert Distiller(llm, store).schedule(message) is None
    disabled = Distiller(llm, store, enabled=False)
    assert disabled.schedule(Exchange(OWNER_DM, "Owner", "my cat is Tom", "ok", label="owner")) is None
    assert fake_api.requests == []


async def test_background_runs_serialised_and_survive_bad_output(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder
) -> None:
    distiller = Distiller(llm, FactStore(db, embedder))
    fake_api.queue(text("I refuse to use tools"), text("still no tool"), text("nope"))
    with structlog.testing.capture_logs() as logs:
        for i in range(3):
            distiller.schedule(Exchange(OWNER_DM, "Owner", f"message {i}", "ok", label="owner"))
        await distiller.drain()
    assert distiller.totals.dropped == 3
    assert any(e["event"] == "memory.quality_warning" for e in logs)
    assert await _all_facts(db) == []


def _turns(*pairs: tuple[str, str]) -> list[dict]:
    messages: list[dict] = []
    for user, assistant in pairs:
        messages += [
            {"role": "user", "content": user},
            {"role": "assistant", "content": [{"type": "text", "text": assistant}]},
        ]
    return messages


async def test_a_transcript_goes_through_the_structured_path(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder
) -> None:
    store = FactStore(db, embedder)
    await store.save(Fact("Mia is the hiking club's treasurer", category="person", scope="chat:-500"))
    distiller = Distiller(llm, store, enabled=False)  # per-exchange distilling off; compaction still extracts
    fake_api.queue(
        _facts(
            _fact("Mia has a dog named Rex", scope="user"),  # not the owner's DM: stored in the chat's scope
            _fact("Mia is the treasurer of the hiking club", scope="chat", category="person"),  # near duplicate
            _fact("Mount Olympus is 2918 m high", scope="global", category="place"),  # a claim: ignored
            {"content": "no importance", "category": "x"},  # malformed
        )
    )
    messages = _turns(
        ("my dog is Rex", "cute!"),
        ("my card PIN is 4321 #nomem", "I won't remember it"),
        ("Olympus is 2918 m", "noted"),
    )
    stats = await distiller.distill_transcript(Transcript(GROUP, messages, label="chat:-500"))
    assert stats.saved == {"chat": 2} and stats.updated == {"chat": 1} and stats.dropped == 1
    assert [f.value for f in stats.kept] == [
        "Mia has a dog named Rex",
        "Mia is the treasurer of the hiking club",
        "Mount Olympus is 2918 m high",
    ]
    assert {f.source for f in stats.kept} == {"compaction"}
    assert sorted(await _all_facts(db)) == [
        ("chat:-500", "Mia has a dog named Rex"),
        ("chat:-500", "Mia is the treasurer of the hiking club"),
        ("chat:-500", "Mount Olympus is 2918 m high"),
    ]
    body = fake_api.requests[-1]
    assert body["tool_choice"] == {"type": "tool", "name": "record_facts"}
    assert body["model"] == "claude-test-small"
    prompt = body["messages"][0]["content"]
    assert "Hiking club" in prompt and "my dog is Rex" in prompt and "Olympus" in prompt
    assert "4321" not in prompt and "I won't remember it" not in prompt  # #nomem and its answer left out


async def test_a_transcript_without_user_words_asks_nothing(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder
) -> None:
    distiller = Distiller(llm, FactStore(db, embedder))
    only_off = _turns(("my PIN is 1 #nomem", "ok"))
    assert (await distiller.distill_transcript(Transcript(OWNER_DM, only_off, label="owner"))).skipped
    assert without_off_switched(only_off + _turns(("hi", "hello"))) == _turns(("hi", "hello"))
    assert fake_api.requests == []


async def test_compaction_extracts_through_the_distiller(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder, tmp_path: Path
) -> None:
    store = FactStore(db, embedder)
    sessions = SessionStore(db)
    compactor = Compactor(db, llm, sessions, DailyLogs(tmp_path / "memory"), store)
    session = await sessions.create(
        GROUP.id,
        messages=_turns(
            ("Mia: I'm allergic to peanuts", "Noted, Mia."),
            ("Tom: hike on Saturday at 8", "Great"),
            ("Tom: see you", "bye"),
        ),
    )
    fake_api.queue(
        _facts(_fact("Mia is allergic to peanuts", scope="user", category="health", importance=0.95)),
        text("Summary: Mia's allergy; the hike on Saturday at 8."),
    )
    outcome = await compactor.compact(session, Clearance("chat:-500"), keep_last=2)
    assert outcome.facts_saved == 1 and outcome.summary.startswith("Summary:")
    rows = await db.fetchall("select scope, value, source from facts")
    assert [tuple(r) for r in rows] == [("chat:-500", "Mia is allergic to peanuts", "compaction")]
    extraction, summary = fake_api.requests[-2:]
    assert extraction["tool_choice"] == {"type": "tool", "name": "record_facts"}
    assert "hike on Saturday" in extraction["messages"][0]["content"] and "tools" not in summary
