"""With the real KnowledgeIndex: MEMORY.md chunks answer a DM, a memory_write is searchable at once, and a
compaction's summary lands in the index as source=session."""

from __future__ import annotations

from pathlib import Path

from teleton.agent.prompt.memory import KNOWLEDGE_HEADER
from teleton.config import Config
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.storage import Database
from tests.agent.conftest import OWNER, AgentHarness, build_harness
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, tool_use, user_said


async def indexed_harness(tmp_path: Path, db: Database, fake: FakeAnthropic) -> tuple[AgentHarness, KnowledgeIndex]:
    h = await build_harness(tmp_path, db, fake)
    config = Config()
    config.storage.workspace = h.workspace
    index = KnowledgeIndex.from_config(db, config, None)
    h.agent.deps.knowledge = h.agent.tool_deps.knowledge = h.agent.compactor.knowledge = index
    return h, index


async def test_memory_file_answers_and_writes_are_searchable_at_once(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    h, index = await indexed_harness(tmp_path, db, fake_api)
    (h.workspace / "MEMORY.md").write_text("# Home\n\nThe spare key is under the blue flowerpot.\n")
    (h.workspace / "memory").mkdir(exist_ok=True)
    (h.workspace / "memory" / "garden.md").write_text("# Garden\n\nTomatoes go in after the last frost.\n")
    await index.reindex()

    def model(body: Body) -> Reply:
        said = user_said(body)
        if said == "remember: the alarm code is 2468":
            return tool_use(("memory_write", {"target": "memory", "content": "- Alarm code: 2468"}))
        context = (
            body["messages"][-1]["content"][0].get("text", "")
            if isinstance(body["messages"][-1]["content"], list)
            else ""
        )
        knowledge = context.split("\n\n[Relevant messages")[0]
        return text(knowledge if knowledge.startswith(KNOWLEDGE_HEADER) else "no idea")

    h.main = model
    answer = await h.dm("where is the spare key?")
    assert "(MEMORY.md) # Home" in answer and "The spare key is under the blue flowerpot." in answer
    assert "Tomatoes" not in answer
    await h.dm("remember: the alarm code is 2468")
    assert "Alarm code: 2468" in await h.dm("what is the alarm code?")


async def test_compaction_summary_goes_into_the_index(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> None:
    h, index = await indexed_harness(tmp_path, db, fake_api)
    for i in range(6):
        await h.dm(f"we talk about sailing lesson {i}")
    await h.dm("/compact 2")
    rows = await db.fetchall("select source, path, text from knowledge where source = 'session'")
    assert len(rows) == 1 and rows[0]["path"].startswith(f"sessions/{OWNER.id}/")
    assert "sailing lesson" in rows[0]["text"]
    hits = await index.search("sailing lessons summary", labels=None)
    assert any("sailing lesson" in hit.text for hit in hits)
