"""Every reader of the archive orders its messages as the turn's own context does (issue 37): the facts found
for the question are extra keys of the messages they came from, and a configured cross-encoder decides the
order. The readers: a turn's context, the memory_search and search_messages tools, the dashboard's Memory page
(served by the stack ``build_agent`` makes, as the daemon serves it) and `teleton feed search`
(tests/cli/test_feed_cmd.py).
Real runtime, SDK and database against the scripted Messages API; the tiny cross-encoder the tests build."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from teleton.agent.factory import AgentStack, build_agent
from teleton.agent.runtime import Agent
from teleton.cli.terminal_gateway import TerminalGateway
from teleton.config.schema import Config
from teleton.daemon.dashboard import start_dashboard
from teleton.gateway.contract import ChatInfo, IncomingMessage
from teleton.llm import LLMClient
from teleton.llm.tool_loop import ToolCall
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.sources import link
from teleton.storage import Database
from teleton.tools.families.memory import memory_tools
from teleton.tools.families.telegram_reads import read_tools
from teleton.tools.registry import Tool, ToolContext, ToolRegistry
from teleton.web.memory_view import MemorySearch
from tests.agent.conftest import ALICE, GROUP, MALLORY, OTHER_GROUP, OWNER, OWNER_DM, AgentHarness, archive_incoming
from tests.agent.test_reranker import MEANT, QUESTION, WORDY
from tests.fakes.cross_encoder import model_folder

HALL = "finally finished it, it hangs in the hall now"
GATE = "the bus leaves at seven from the north gate"

Reader = Callable[[AgentHarness, str, ChatInfo | None], Awaitable[str]]


async def _tool(agent: Agent, name: str, tools: list[Tool], query: str, chat: ChatInfo | None) -> str:
    """What the tool ``name`` shows the owner in their DM, asked about ``chat`` (None: every chat)."""
    args = {"query": query, "limit": 5} | ({} if chat is None else {"chat_id": chat.id})
    clearance = agent.principals.clearance(OWNER_DM.id)
    ctx = ToolContext(chat=OWNER_DM, sender=OWNER, is_admin=True, clearance=clearance, deps=agent.tool_deps)
    return (await ToolRegistry(tools).execute(ToolCall("t", name, args), ctx)).content


async def _turn(h: AgentHarness, query: str, chat: ChatInfo | None) -> str:
    """What the model is given for ``query`` asked in the owner's DM, or by Alice in ``chat``."""
    start = len(h.fake.requests)
    await (h.dm(query) if chat is None else h.group(query, chat=chat))
    return str(h.main_requests(start)[0]["messages"][-1]["content"])


async def _memory_search(h: AgentHarness, query: str, chat: ChatInfo | None) -> str:
    return await _tool(h.agent, "memory_search", memory_tools(), query, chat)


async def _search_messages(h: AgentHarness, query: str, chat: ChatInfo | None) -> str:
    return await _tool(h.agent, "search_messages", read_tools(), query, chat)


async def _memory_page(h: AgentHarness, query: str, as_chat: ChatInfo | None) -> str:
    """The Memory page's messages, searched as the owner or as ``as_chat``."""
    agent = h.agent
    deps = agent.tool_deps
    page = MemorySearch(deps.db, agent.principals, None, deps.search, deps.reranker, deps.rerank_candidates)
    found = await page.search(query, None if as_chat is None else as_chat.id)
    return "\n".join(f.text for f in found if f.layer == "feed")


READERS: dict[str, Reader] = {
    "turn": _turn,
    "memory_search": _memory_search,
    "search_messages": _search_messages,
    "memory page": _memory_page,
}


async def _painted(h: AgentHarness) -> None:
    """Alice's "finally finished it" in the group, the fact drawn from it, and a fact of the group wrongly
    linked to Mallory's message in another group."""
    hall, gate = h.message(GROUP, ALICE, HALL), h.message(OTHER_GROUP, MALLORY, GATE)
    for msg in (hall, gate):
        await archive_incoming(h.db, msg)
    store = h.agent.deps.facts
    painted = await store.save(Fact("Alice painted a watercolour of the harbour", category="art",
                                    scope=f"chat:{GROUP.id}"))  # fmt: skip
    await h.db.write(lambda conn: link(conn, painted.id, GROUP.id, [hall.message_id]))
    wrong = await store.save(Fact("Alice paints with a bus driver's patience", category="art",
                                  scope=f"chat:{GROUP.id}"))  # fmt: skip
    await h.db.write(lambda conn: link(conn, wrong.id, OTHER_GROUP.id, [gate.message_id]))


@pytest.mark.parametrize("reader", list(READERS))
async def test_each_reader_finds_a_message_through_its_fact_in_its_own_chat_only(
    harness: AgentHarness, reader: str
) -> None:
    """The question shares no word with HALL (nor with its sender); the fact drawn from it does. A fact never
    brings in a message of another chat than its own, nor of a chat the reader did not ask about."""
    await _painted(harness)
    read, question = READERS[reader], "who painted the harbour watercolour?"
    everywhere = await read(harness, question, None)
    assert HALL in everywhere
    assert GATE not in everywhere
    elsewhere = await read(harness, question, OTHER_GROUP)  # one chat asked for (or seen as that chat)
    assert HALL not in elsewhere


@pytest.mark.parametrize("reader", ["search_messages", "memory page"])
async def test_each_reader_orders_by_the_configured_cross_encoder(
    tmp_path: Path, db: Database, llm: LLMClient, reader: str
) -> None:
    """Built from a config as the daemon builds it: the search ranks WORDY first, the cross-encoder MEANT."""

    async def order(reranker: dict[str, str]) -> list[str]:
        storage = {"workspace": str(tmp_path / "ws"), "database": str(tmp_path / "t.db")}
        telegram = {"owner_id": OWNER.id}
        config = Config.model_validate({"storage": storage, "telegram": telegram, "memory": {"reranker": reranker}})
        stack = await build_agent(config, db=db, gateway=TerminalGateway(db=db), llm=llm)
        try:
            if reader == "memory page":
                shown = await _served_memory_page(config, stack)
            else:
                shown = await _tool(stack.agent, "search_messages", read_tools(), QUESTION, None)
        finally:
            await stack.agent.shutdown(1.0)
        return sorted((t for t in (WORDY, MEANT) if t in shown), key=shown.index)

    for n, said in enumerate((WORDY, MEANT)):
        await archive_incoming(db, IncomingMessage(GROUP, ALICE, n + 1, said, time.time()))
    assert await order({"kind": "off"}) == [WORDY, MEANT]
    folder = str(model_folder(tmp_path / "ce"))
    assert await order({"kind": "cross_encoder", "model_path": folder}) == [MEANT, WORDY]


async def _served_memory_page(config: Config, stack: AgentStack) -> str:
    """The Memory page's table, as the daemon serves it for this stack (``web.enabled``)."""
    web = config.model_copy(update={"web": config.web.model_copy(update={"enabled": True, "port": 0,
                                                                           "token": "t" * 40})})  # fmt: skip
    server = await start_dashboard(web, lambda: None, stack=stack)
    url = f"http://127.0.0.1:{server.port}"
    try:
        async with httpx.AsyncClient(base_url=url, headers={"origin": url}, follow_redirects=True) as http:
            await http.post("/login", data={"token": "t" * 40})
            page = (await http.get("/memory", params={"q": QUESTION})).text
    finally:
        await server.stop()
    return page.split("<tbody>")[1]
