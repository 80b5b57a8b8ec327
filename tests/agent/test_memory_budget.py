"""The memory budget of a turn (issue 15): with the real local model, real SQLite + sqlite-vec, the real
runtime and the scripted Messages API. What the model was sent is measured in the request bodies the fake
server received, with the project's one token estimate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from teleton.agent.deps import AgentSettings
from teleton.agent.prompt.budget import Item, fill, log_entries
from teleton.config import Config
from teleton.memory.embeddings.local import LocalEmbedder
from teleton.memory.embeddings.packaged import packaged_model
from teleton.memory.facts.store import Fact
from teleton.memory.feed.embedding import embed_pending
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.storage import Database
from teleton.text.tokens import estimate_tokens
from tests.agent.conftest import ALICE, GROUP, OWNER, OWNER_DM, AgentHarness, build_harness
from tests.conftest import DatabaseTemplates
from tests.fakes.anthropic_server import Body, FakeAnthropic
from tests.fakes.turn_message import turn_message

BUDGET = 3_000
LOCKER = "The owner's gym locker code is 7781"
HEAD = "Olga grew up in a lighthouse keeper's cottage on the northern cape"
OLDEST_LOG = "note zero about the drizzle forecast"
NEWEST_NOTE = "The newest note: the passport renewal is booked for Friday"


class OnceEachText(LocalEmbedder):
    """The real local model, each distinct text run through it once in this module: every test stuffs the same
    memory (``stuff``: ~280 texts, 2-3 s of the model each time), so its vectors are the ones the first test
    computed. A text's vector does not depend on what it is embedded with, so this is exact. Questions and
    prompts are texts like any other: what is new goes to the model."""

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        super().__init__(packaged_model())

    def _run_one(self, text: str) -> np.ndarray:
        if text not in self.vectors:
            self.vectors[text] = super()._run_one(text)
        return self.vectors[text]


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    return OnceEachText()


@pytest.fixture
async def vdb(tmp_path: Path, model: LocalEmbedder, database_templates: DatabaseTemplates) -> AsyncIterator[Database]:
    database = await database_templates.open(tmp_path / "teleton.db", embedding=(model.model_id, model.dims))
    yield database
    await database.close()


async def harness_with(
    tmp_path: Path, db: Database, fake: FakeAnthropic, model: LocalEmbedder, budget: int | None = BUDGET
) -> AgentHarness:
    settings = AgentSettings(session_reset_hour=None, session_idle_minutes=None, memory_budget=budget)
    h = await build_harness(tmp_path, db, fake, settings)
    h.agent.context.embedder = h.agent.tool_deps.embedder = model
    h.agent.deps.facts.embedder = model
    return h


def memory_parts(body: Body) -> list[str]:
    """The memory a request carries: block 2 after its '## This chat' part, and the user message's daily logs
    (the turn's note before '## Now') and retrieved-context block."""
    system = [block["text"] for block in body["system"]]
    message = turn_message(body)
    parts = [system[1].partition("\n\n")[2], message.logs, message.context]
    return [part for part in parts if part]


def memory_tokens(body: Body) -> int:
    return estimate_tokens("\n\n".join(memory_parts(body)))


async def stuff(h: AgentHarness, db: Database, model: LocalEmbedder) -> None:
    """Far more relevant memory than a 3,000-token budget holds, in every layer."""
    ws = h.workspace
    notes = [f"## {HEAD.split()[0]}'s childhood\n\n{HEAD}, and loved the fog horn.\n"]
    notes += [
        f"## Gym week {n}\n\n- went to the gym on day {n}, the locker room was busy\n- trainer said: more squats\n"
        for n in range(150)
    ]
    (ws / "MEMORY.md").write_text("\n".join(notes) + f"\n## Latest\n\n{NEWEST_NOTE}.\n")
    today = datetime.now().astimezone().date()
    (ws / "memory").mkdir(exist_ok=True)
    for day, topic in ((today - timedelta(days=1), OLDEST_LOG), (today, "gym locker")):
        lines = [f"[00:{n % 60:02d}] User: {topic} {n} | Assistant: noted, {topic} {n}" for n in range(100)]
        lines[0] = f"[00:00] User: {topic} | Assistant: ok"
        (ws / "memory" / f"{day:%Y-%m-%d}.md").write_text("\n".join(lines) + "\n")
    facts = h.agent.deps.facts
    await facts.save(Fact(LOCKER, category="codes", key="gym locker"))
    for n in range(40):
        await facts.save(Fact(f"Visited the gym with friend number {n}", category="events", key=f"gym visit {n}"))
    for n in range(10):
        await facts.save(Fact(f"Important: allergy number {n} to note", category="health", importance=0.9))
    for n in range(60):
        chat, sender = (OWNER_DM, OWNER) if n % 2 else (GROUP, ALICE)
        await h.archive(h.message(chat, sender, f"the gym locker room was crowded again, visit {n}"))
    await embed_pending(db, model)
    config = Config()
    config.storage.workspace = ws
    index = KnowledgeIndex.from_config(db, config, model)
    await index.reindex()
    await index.embed_pending()
    h.agent.deps.knowledge = h.agent.tool_deps.knowledge = index
    raw = sum(estimate_tokens(p.read_text()) for p in [ws / "MEMORY.md", *(ws / "memory").glob("*.md")])
    assert raw > 3 * BUDGET  # the workspace alone holds far more than fits


async def test_memory_of_a_turn_never_exceeds_the_budget(
    tmp_path: Path, vdb: Database, fake_api: FakeAnthropic, model: LocalEmbedder
) -> None:
    h = await harness_with(tmp_path, vdb, fake_api, model)
    await stuff(h, vdb, model)
    questions = ["what is my gym locker code?", "how busy was the gym locker room?", "which gym visits do I have?"]
    for question in questions:
        await h.dm(question)
    await h.group("anyone at the gym locker room today?")
    bodies = h.main_requests()
    assert len(bodies) == 4
    for body in bodies:
        assert 0 < memory_tokens(body) <= BUDGET, memory_parts(body)
    stats = h.agent.last_turns.get(OWNER.id)
    assert stats is not None and memory_tokens(bodies[2]) <= stats.memory.total <= BUDGET
    assert sum(stats.memory.dropped.values()) > 100  # far more was found than fits
    first = "\n".join(memory_parts(bodies[0]))
    assert "7781" in first  # the most relevant item is in ...
    assert OLDEST_LOG not in first and HEAD not in first  # ... an old log entry and MEMORY.md's oldest note are out
    assert NEWEST_NOTE in body_text(bodies[0])  # the stable part keeps MEMORY.md's newest chunk
    assert all("Important: allergy number" in body_text(b) for b in bodies[:3])


def body_text(body: Body) -> str:
    return "\n".join(block["text"] for block in body["system"])


async def test_stable_parts_stay_first_and_identical_so_the_cache_hits(
    tmp_path: Path, vdb: Database, fake_api: FakeAnthropic, model: LocalEmbedder
) -> None:
    h = await harness_with(tmp_path, vdb, fake_api, model)
    await stuff(h, vdb, model)
    questions = ["what is my gym locker code?", "anything about the passport?", "how many gym visits?", "squats?"]
    reads = []
    for question in questions:
        await h.dm(question)
        stats = h.agent.last_turns.get(OWNER.id)
        assert stats is not None
        reads.append(stats.usage.cache_read_tokens)
    bodies = h.main_requests()
    first = bodies[0]["system"]
    assert [b.get("cache_control") for b in first] == [{"type": "ephemeral"}, {"type": "ephemeral"}]
    assert NEWEST_NOTE in first[1]["text"]  # memory is in the cached blocks ...
    for body in bodies[1:]:
        assert body["system"] == first  # ... and byte-identical from turn to turn
    assert len({turn_message(b).context for b in bodies}) == len(bodies)  # the per-turn part moves
    assert reads[0] == 0 and all(r > 0 for r in reads[1:])

    # An edit of MEMORY.md changes block 2 only: the tools and block 1 are still read from the cache.
    with (h.workspace / "MEMORY.md").open("a") as f:
        f.write("\n- one more note\n")
    await h.dm("and now?")
    stats = h.agent.last_turns.get(OWNER.id)
    assert stats is not None and stats.usage.cache_read_tokens > 0 and stats.usage.cache_write_tokens > 0
    assert stats.usage.cache_read_tokens < reads[-1]


async def test_status_shows_memory_tokens_and_cache_hit_rate(
    tmp_path: Path, vdb: Database, fake_api: FakeAnthropic, model: LocalEmbedder
) -> None:
    h = await harness_with(tmp_path, vdb, fake_api, model)
    await stuff(h, vdb, model)
    await h.dm("what is my gym locker code?")
    await h.dm("and the gym visits?")
    status = await h.dm("/status")
    stats = h.agent.last_turns.get(OWNER.id)
    assert stats is not None and status is not None
    assert f"Memory in the last turn: {stats.memory.total:,} of 3,000 tokens (important facts " in status
    assert "MEMORY.md " in status and "daily logs " in status and "items left out" in status
    session = await h.agent.sessions.active(OWNER.id)
    assert session is not None
    rate = 100 * session.cache_read_tokens / session.all_input  # all input: not cached, written, read
    last = 100 * stats.usage.cache_read_tokens / stats.usage.prompt_tokens
    assert f"Prompt cache hit rate: {rate:.0f}% this session, {last:.0f}% in the last turn" in status
    assert last > 0
    group = await h.group("/status")  # another chat: none of the owner's figures
    assert group is not None and "none since start" in group


@pytest.mark.parametrize("budget", [0, 12])
async def test_a_tiny_budget_sends_no_memory_and_still_answers(
    tmp_path: Path, vdb: Database, fake_api: FakeAnthropic, model: LocalEmbedder, budget: int
) -> None:
    h = await harness_with(tmp_path, vdb, fake_api, model, budget=budget)
    await stuff(h, vdb, model)
    assert await h.dm("what is my gym locker code?") == "ok"
    body = h.main_requests()[-1]
    assert memory_tokens(body) <= budget
    if budget == 0:
        message = turn_message(body)
        assert memory_parts(body) == [] and not message.context and message.note.startswith("## Now")
    stats = h.agent.last_turns.get(OWNER.id)
    assert stats is not None and stats.memory.total <= budget


def test_fill_takes_whole_items_and_a_smaller_one_after_a_miss() -> None:
    big = Item("knowledge", "[K]", "x" * 70, score=0.9)
    small = Item("facts", "[K]", "y" * 7, score=0.5)
    header = estimate_tokens("[K]\n\n")
    filled = fill([big, small], small.cost + header)
    assert filled.kept == [small]  # the big one did not fit; the smaller one after it did
    assert filled.usage.dropped == {"knowledge": 1} and filled.usage.total == small.cost + header
    assert fill([big, small], 0).kept == [] and fill([big, small], None).kept == [big, small]
    assert filled.section("[K]") == "[K]\n" + "y" * 7


def test_daily_log_entries_are_whole() -> None:
    text = "[09:00] User: a | Assistant: b\n\n## [10:00] Session summary\nwe talked\nabout boats\n[11:00] User: c"
    assert log_entries(text) == [
        "[09:00] User: a | Assistant: b",
        "## [10:00] Session summary\nwe talked\nabout boats",
        "[11:00] User: c",
    ]


async def test_no_budget_keeps_everything(
    tmp_path: Path, vdb: Database, fake_api: FakeAnthropic, model: LocalEmbedder
) -> None:
    h = await harness_with(tmp_path, vdb, fake_api, model, budget=None)
    (h.workspace / "MEMORY.md").write_text(f"{HEAD}.\n")
    await h.dm("hello there, tell me about lighthouses")
    assert HEAD in body_text(h.main_requests()[-1])
