"""The reranking stage of a turn's memory (issue 37, item 4): a configured cross-encoder decides the order of
the archived messages a turn reads, and one that cannot load leaves the search as it was, said once. The
cross-encoder is the tiny model the tests build (``tests/fakes/cross_encoder.py``), whose scores can be worked
out by hand; the rest is the real runtime, SDK and database against the scripted Messages API."""

from __future__ import annotations

from pathlib import Path

import structlog

from teleton.agent.factory import build_agent
from teleton.cli.terminal_gateway import TerminalGateway
from teleton.config.schema import Config, RerankerConfig
from teleton.llm import LLMClient
from teleton.llm.tool_loop import ToolCall
from teleton.memory.rerank.cross_encoder import CrossEncoder, load_cross_encoder
from teleton.storage import Database
from teleton.tools.families.memory import memory_tools
from teleton.tools.registry import ToolContext, ToolRegistry
from tests.agent.conftest import ALICE, GROUP, OWNER, OWNER_DM, archive_incoming, build_harness
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.cross_encoder import by_hand, model_folder

# The search ranks the first above the second (it holds two of the question's words, twice each); the tiny
# cross-encoder ranks the second first ("meeting" weighs most: tests/fakes/cross_encoder.py).
WORDY = "lunch office lunch office"
MEANT = "meeting moved"
QUESTION = "lunch office meeting"


async def _shown_order(tmp_path: Path, db: Database, fake: FakeAnthropic, reranker: CrossEncoder | None) -> list[str]:
    h = await build_harness(tmp_path, db, fake, reranker=reranker)
    try:
        if not await db.fetchone("select 1 from tg_messages where chat_id = ?", (GROUP.id,)):
            for said in (WORDY, MEANT):
                await archive_incoming(db, h.message(GROUP, ALICE, said))
        start = len(fake.requests)
        await h.dm(QUESTION)
        shown = str(h.main_requests(start)[0]["messages"][-1]["content"])
    finally:
        await h.llm.close()
    return sorted((t for t in (WORDY, MEANT) if t in shown), key=shown.index)


async def test_a_configured_cross_encoder_decides_the_order_of_the_messages_a_turn_reads(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    assert by_hand(MEANT) > by_hand(WORDY)  # what the model says, by hand
    assert await _shown_order(tmp_path, db, fake_api, None) == [WORDY, MEANT]  # the search's own order
    encoder = load_cross_encoder(RerankerConfig(kind="cross_encoder", model_path=model_folder(tmp_path / "ce")))
    try:
        assert await _shown_order(tmp_path, db, fake_api, encoder) == [MEANT, WORDY]
    finally:
        encoder.close()


async def test_memory_search_orders_the_messages_it_finds_as_the_turn_does(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    async def found(reranker: CrossEncoder | None) -> list[str]:
        h = await build_harness(tmp_path, db, fake_api, reranker=reranker)
        if not await db.fetchone("select 1 from tg_messages where chat_id = ?", (GROUP.id,)):
            for said in (WORDY, MEANT):
                await archive_incoming(db, h.message(GROUP, ALICE, said))
        clearance = h.agent.principals.clearance(OWNER_DM.id)
        ctx = ToolContext(chat=OWNER_DM, sender=OWNER, is_admin=True, clearance=clearance, deps=h.agent.tool_deps)
        call = ToolCall("s", "memory_search", {"query": QUESTION, "limit": 2})
        shown = (await ToolRegistry(memory_tools()).execute(call, ctx)).content
        await h.llm.close()
        return sorted((t for t in (WORDY, MEANT) if t in shown), key=shown.index)

    assert await found(None) == [WORDY, MEANT]
    encoder = load_cross_encoder(RerankerConfig(kind="cross_encoder", model_path=model_folder(tmp_path / "ce")))
    try:
        assert await found(encoder) == [MEANT, WORDY]
    finally:
        encoder.close()


async def test_the_daemon_loads_the_configured_reranker_and_one_that_cannot_load_is_one_line(
    tmp_path: Path, db: Database, llm: LLMClient
) -> None:
    storage = {"workspace": str(tmp_path / "ws"), "database": str(tmp_path / "t.db")}

    async def reranker_of(folder: Path) -> object:
        memory = {"reranker": {"kind": "cross_encoder", "model_path": str(folder)}}
        config = Config.model_validate({"storage": storage, "memory": memory})
        stack = await build_agent(config, db=db, gateway=TerminalGateway(db=db), llm=llm)
        await stack.agent.shutdown(1.0)
        return stack.agent.deps.reranker

    assert isinstance(await reranker_of(model_folder(tmp_path / "ce")), CrossEncoder)
    with structlog.testing.capture_logs() as logs:
        assert await reranker_of(tmp_path / "nowhere") is None  # the turn searches as without it
    said = [e for e in logs if e["event"] == "reranker_unavailable"]
    assert len(said) == 1 and "nowhere" in said[0]["reason"] and "\n" not in said[0]["reason"]
