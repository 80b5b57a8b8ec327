"""memory_read's recent/list modes, memory_save labels and memory_remove, each within the turn's clearance."""

from __future__ import annotations

from pathlib import Path

import pytest

from teleton.agent.deps import AgentSettings
from teleton.agent.factory import build_agent
from teleton.cli.terminal_gateway import TerminalGateway
from teleton.config.schema import Config
from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.llm import LLMClient
from teleton.llm.tool_loop import ToolCall
from teleton.memory.facts.store import RECALL_PARAMS, FactStore
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.search.hybrid import SearchParams
from teleton.privacy import Principals
from teleton.storage import Database
from teleton.tools.families.memory import memory_tools
from teleton.tools.outbox import Outbox
from teleton.tools.registry import ToolContext, ToolDeps, ToolRegistry
from tests.agent.conftest import build_harness
from tests.fakes.anthropic_server import FakeAnthropic

OWNER_DM = ChatInfo(4242, "dm")
GROUP = ChatInfo(-100, "group", "Friends")


ADMIN_DM = ChatInfo(5151, "dm")  # an admin's own DM: control rights, not the owner's memory
PRINCIPALS = Principals(owner_id=OWNER_DM.id, admin_ids=frozenset({ADMIN_DM.id}))


def _ctx(chat: ChatInfo, db: Database, workspace: Path, admin: bool) -> ToolContext:
    deps = ToolDeps(db=db, workspace=workspace, facts=FactStore(db), daily_logs=DailyLogs(workspace / "memory"),
                    principals=PRINCIPALS)  # fmt: skip
    return ToolContext(chat=chat, sender=UserInfo(chat.id if chat.type == "dm" else 4242), is_admin=admin,
                       clearance=PRINCIPALS.clearance(chat.id), deps=deps)  # fmt: skip


async def test_read_recent_and_list(db: Database, tmp_path: Path) -> None:
    reg, ctx = ToolRegistry(memory_tools()), _ctx(OWNER_DM, db, tmp_path, admin=True)
    (tmp_path / "MEMORY.md").write_text("# Memory\n")
    await ctx.deps.daily_logs.append_exchange("ferry at nine?", "Yes, the 9:00 ferry.")
    recent = await reg.execute(ToolCall("t1", "memory_read", {"target": "recent"}), ctx)
    assert "ferry at nine" in recent.content and not recent.is_error
    listing = await reg.execute(ToolCall("t2", "memory_read", {"target": "list"}), ctx)
    assert "MEMORY.md" in listing.content and "memory/" in listing.content


async def test_save_labels_and_remove(db: Database, tmp_path: Path) -> None:
    reg = ToolRegistry(memory_tools())
    dm, group = _ctx(OWNER_DM, db, tmp_path, admin=True), _ctx(GROUP, db, tmp_path, admin=False)
    admin_dm = _ctx(ADMIN_DM, db, tmp_path, admin=True)
    # Public means every chat reads it, and the owner's turn has seen the owner's memory: it waits for the
    # owner's approval, then is saved exactly as shown.
    dm.deps.outbox = Outbox(db, None, PRINCIPALS)
    dm.deps.outbox.attach(reg.tools(), dm.deps)
    held = await reg.execute(
        ToolCall("a", "memory_save", {"value": "Water boils at 100 C", "visibility": "public"}), dm
    )
    assert "Held for the owner's approval (#1)" in held.content
    code = (await db.fetchone("select digest from pending_sends where id = 1"))["digest"][:8]
    assert (await dm.deps.outbox.approve(1, code, by=OWNER_DM.id)).startswith("Done #1: saved public fact")
    await reg.execute(ToolCall("b", "memory_save", {"value": "Olga's PIN hint is 'blue'"}), dm)
    await reg.execute(ToolCall("c", "memory_save", {"value": "Meetups are on Tuesdays"}), group)
    await reg.execute(ToolCall("c2", "memory_save", {"value": "Ada likes tea"}), admin_dm)
    # Only the owner makes a fact public; a group asking for it is refused, not quietly widened.
    refused = await reg.execute(ToolCall("c3", "memory_save", {"value": "x", "visibility": "public"}), group)
    assert refused.is_error and "owner" in refused.content
    scopes = {r[1]: r[0] for r in await db.fetchall("select scope, value from facts")}
    assert scopes == {"Water boils at 100 C": "public", "Olga's PIN hint is 'blue'": "owner",
                      "Meetups are on Tuesdays": "chat:-100", "Ada likes tea": "user:5151"}  # fmt: skip
    private_id = (await db.fetchone("select id from facts where scope = 'owner'"))[0]
    public_id = (await db.fetchone("select id from facts where scope = 'public'"))[0]
    for attempt, fact_id in (("d", private_id), ("d2", public_id)):  # neither is the group's to delete
        refused = await reg.execute(ToolCall(attempt, "memory_remove", {"id": fact_id}), group)
        assert refused.is_error and "PIN" not in refused.content
    assert (await db.fetchone("select count(*) from facts where id = ?", (private_id,)))[0] == 1
    # The admin's DM recalls the admin's own and public facts, never the owner's.
    recalled = await reg.execute(ToolCall("r", "memory_recall", {"query": "PIN hint tea water"}), admin_dm)
    assert "Ada likes tea" in recalled.content and "Water boils" in recalled.content
    assert "PIN" not in recalled.content
    removed = await reg.execute(ToolCall("e", "memory_remove", {"id": private_id}), dm)
    assert removed.content == f"Removed fact #{private_id}."
    assert await FactStore(db).count() == 3


async def test_only_the_owner_lists_or_reads_the_logs(db: Database, tmp_path: Path) -> None:
    reg = ToolRegistry(memory_tools())
    reg.set_override("memory_read", scope="always")  # even widened by an admin, the clearance refuses
    group = _ctx(GROUP, db, tmp_path, admin=True)
    await group.deps.daily_logs.append_exchange("my secret plan", "ok")
    (tmp_path / "MEMORY.md").write_text("secret memory")
    for ctx in (group, _ctx(ADMIN_DM, db, tmp_path, admin=True)):
        for target in ("recent", "list", "memory", "daily"):
            result = await reg.execute(ToolCall("t", "memory_read", {"target": target}), ctx)
            assert result.is_error and "secret" not in result.content, (ctx.chat, target)


async def test_memory_search_follows_the_memory_search_settings(db: Database, tmp_path: Path) -> None:
    reg, ctx = ToolRegistry(memory_tools()), _ctx(OWNER_DM, db, tmp_path, admin=True)
    (tmp_path / "memory").mkdir(exist_ok=True)
    (tmp_path / "memory" / "boats.md").write_text("# Boats\nThe ferry to the island leaves at nine.\n")
    await KnowledgeIndex(db, tmp_path).reindex()
    # A question, not a keyword-shaped query: an exact match of typed keywords clears any floor (fusion.lift_exact).
    search = ToolCall("s", "memory_search", {"query": "when does the ferry to the island leave?"})
    assert "leaves at nine" in (await reg.execute(search, ctx)).content
    # memory.min_score (and the weights) reach the tool as they reach the turn's own retrieval: a floor no
    # result can pass leaves nothing, where the default found the note.
    ctx.deps.search = SearchParams(min_score=1.01)
    assert (await reg.execute(search, ctx)).content == "Nothing found."


async def test_the_runtime_gives_the_tools_the_configured_search(tmp_path: Path, db: Database) -> None:
    config = Config.model_validate({"memory": {"vector_weight": 0.8, "keyword_weight": 0.2, "min_score": 0.3}})
    settings = AgentSettings.from_config(config)
    with FakeAnthropic() as fake:
        h = await build_harness(tmp_path, db, fake, settings=settings)
        search = h.agent.tool_deps.search
    assert (search.vector_weight, search.keyword_weight, search.min_score) == (0.8, 0.2, 0.3)


def test_the_search_weights_are_the_models_own_unless_set() -> None:
    def weights(**config: object) -> tuple[float, float]:
        params = AgentSettings.from_config(Config.model_validate(config)).context.params
        return params.vector_weight, params.keyword_weight

    assert weights() == (0.8, pytest.approx(0.2))  # the default model, e5: its meaning-match is worth more
    assert weights(embedding={"model": "all-MiniLM-L6-v2"}) == (0.5, 0.5)
    e5 = {"embedding": {"model": "multilingual-e5-small"}}
    assert weights(**e5) == (0.8, pytest.approx(0.2))
    assert weights(**e5, memory={"vector_weight": 0.6}) == (0.6, pytest.approx(0.4))  # set: the user's
    assert weights(**e5, memory={"keyword_weight": 0.5}) == (0.5, 0.5)
    assert weights(embedding={"provider": "openai_compatible", "model": "multilingual-e5-small"}) == (0.5, 0.5)


async def test_the_fact_store_weighs_its_two_legs_as_every_search(tmp_path: Path, db: Database, llm: LLMClient) -> None:
    # Facts are searched with memory.* too: one rule for every search (they had a fixed 0.5/0.5 of their own).
    storage = {"workspace": str(tmp_path / "ws"), "database": str(tmp_path / "t.db")}
    config = Config.model_validate({"storage": storage, "memory": {"vector_weight": 0.7}})
    stack = await build_agent(config, db=db, gateway=TerminalGateway(db=db), llm=llm)
    params = stack.agent.deps.facts.params
    await stack.agent.shutdown(1.0)
    assert (params.vector_weight, params.keyword_weight) == (0.7, pytest.approx(0.3))
    assert params.limit == RECALL_PARAMS.limit  # as many candidates re-ranked by use and freshness
