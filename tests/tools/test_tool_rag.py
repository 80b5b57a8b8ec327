"""Tool RAG: incremental index, scoped selection with the always-include set, fallback, and quality."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from typing import Any

from teleton.config.schema import Config
from teleton.storage import Database
from teleton.tools.rag import StickyPicks, ToolIndex, ToolRagSettings
from teleton.tools.registry import Tool, ToolRegistry
from teleton.tools.suite import suite_tools
from tests.tools.conftest import DM, GROUP

ROOT = Path(__file__).resolve().parents[2]


def full_registry() -> ToolRegistry:
    config = Config()
    config.capabilities.exec.enabled = True
    return ToolRegistry(suite_tools(config))


async def vec_ids(db: Database) -> set[int]:
    return {int(r[0]) for r in await db.fetchall("select id from tool_index_vec")}


async def test_sync_embeds_only_what_changed(db: Database, embedder: Any) -> None:
    registry = full_registry()
    index = ToolIndex(db, embedder)
    first = await index.sync(registry)
    assert len(first.added) == len(registry.names) == first.embedded
    assert len(await vec_ids(db)) == len(registry.names)
    again = await index.sync(registry)
    assert (again.added, again.changed, again.removed, again.embedded) == ([], [], [], 0)

    tools = [registry.get(n) for n in registry.names]
    changed = [
        dataclasses.replace(t, description=t.description + " Also polls.") if t.name == "react" else t
        for t in tools
        if t is not None and t.name != "exec"
    ]
    report = await index.sync(ToolRegistry(changed))
    assert report.changed == ["react"] and report.removed == ["exec"] and report.embedded == 1
    rows = await db.fetchall("select id, name, search_text from tool_index")
    assert "exec" not in {r["name"] for r in rows}
    assert await vec_ids(db) == {r["id"] for r in rows}  # no orphan vectors
    react = next(r for r in rows if r["name"] == "react")
    assert "Also polls" in react["search_text"] and react["search_text"].startswith("react. ")


async def test_selection_respects_scope_and_always_includes(db: Database, embedder: Any) -> None:
    registry = full_registry()
    index = ToolIndex(db, embedder, ToolRagSettings(top_k=5, session_tools="picked"))
    await index.sync(registry)
    picked = await index.select(registry, GROUP, False, "list all my chats and kick the spammer")
    assert "list_dialogs" not in picked and "kick_user" not in picked  # dm-only / admin-only
    assert {"send_message", "reply", "memory_search"} <= set(picked)
    assert len(picked) <= 5 + 3
    owner = await index.select(registry, DM, True, "list all my chats and kick the spammer")
    assert {"list_dialogs", "kick_user"} <= set(owner)
    registry.set_override("kick_user", enabled=False)
    assert "kick_user" not in await index.select(registry, DM, True, "kick the spammer")


async def test_the_shell_is_offered_to_the_owner_alone(db: Database, embedder: Any) -> None:
    registry = full_registry()  # exec enabled: the owner's alone (docs/privacy.md)
    index = ToolIndex(db, embedder, ToolRagSettings(top_k=5, session_tools="picked"))
    await index.sync(registry)
    asked = "run df -h on the server"
    assert "exec" in await index.select(registry, DM, True, asked, is_owner=True)
    assert "exec" not in await index.select(registry, DM, True, asked)  # an admin who is not the owner


async def test_a_precomputed_query_vector_is_used(db: Database, embedder: Any) -> None:
    registry = full_registry()
    index = ToolIndex(db, embedder, ToolRagSettings(top_k=3, always_include=(), session_tools="picked"))
    await index.sync(registry)
    vector = (await embedder.embed(["pin this message to the top of the chat"]))[0]
    # No words to match: only the vector (computed once per message by the caller) can rank the tools.
    picked = await index.select(registry, DM, True, "...", vector)
    assert "pin_message" in picked and len(picked) == 3


async def test_all_tools_when_retrieval_finds_nothing(db: Database) -> None:
    registry = full_registry()
    # Keyword-only (embedding.provider: none).
    index = ToolIndex(db, None, ToolRagSettings(top_k=5, session_tools="picked"))
    await index.sync(registry)
    everything = [t.name for t in registry.available(GROUP, False)]
    assert await index.select(registry, GROUP, False, "🙂🙂") == everything
    assert await index.select(registry, GROUP, False, "") == everything
    picked = await index.select(registry, GROUP, False, "make a poll")
    assert picked[0] == "send_poll" and len(picked) <= 8
    disabled = ToolIndex(db, None, ToolRagSettings(enabled=False, session_tools="picked"))
    assert await disabled.select(registry, GROUP, False, "make a poll") == everything


def load_eval() -> Any:
    spec = importlib.util.spec_from_file_location("eval_tool_rag", ROOT / "scripts" / "eval_tool_rag.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


async def test_right_tool_is_offered_for_natural_requests(embedder: Any) -> None:
    evaluation = load_eval()
    assert len(evaluation.CASES) == 40
    report = await evaluation.evaluate(evaluation.CASES, top_k=25, embedder=embedder)
    assert report.share >= evaluation.FLOOR, report.misses
    names = {n for _, n in evaluation.CASES}
    assert names <= set(full_registry().names)  # every label names a real tool


async def test_held_out_requests_never_tuned_on(embedder: Any) -> None:
    evaluation = load_eval()
    report = await evaluation.evaluate(evaluation.HELD_OUT, top_k=25, embedder=embedder)
    assert report.share >= 0.9, report.misses  # measured 30/30 when written


async def test_a_tool_added_after_the_sync_is_still_offered(db: Database) -> None:
    registry = full_registry()
    index = ToolIndex(db, None, ToolRagSettings(top_k=3, session_tools="picked"))
    await index.sync(registry)
    late = dataclasses.replace(registry.get("react"), name="late_tool")  # type: ignore[arg-type]
    registry.register(late)
    assert "late_tool" in await index.select(registry, DM, True, "make a poll")
    await index.sync(registry)
    assert "late_tool" not in await index.select(registry, DM, True, "make a poll")


def outside_tools(count: int) -> list[Tool]:
    """An outside server's tools, each about a weather word the message below matches."""
    return [
        Tool(f"weather_{n}", f"Weather forecast number {n} for a city.", {"type": "object"}, _never, category="mcp:wx")
        for n in range(count)
    ]


async def _never(args: dict[str, Any], ctx: Any) -> str:
    raise AssertionError("not called")


async def test_session_tools_all_offers_every_one_of_ours_and_ranks_an_outside_servers(db: Database) -> None:
    registry = full_registry()
    for tool in outside_tools(12):
        registry.register(tool)
    index = ToolIndex(db, None, ToolRagSettings(top_k=25, max_outside=8))  # session_tools: all, the default
    await index.sync(registry)
    ours = [t.name for t in registry.available(DM, True) if not t.outside]
    # Nothing to rank of an outside server's: every one of ours, the same list whatever the message.
    for message in ("make a poll", "🙂", "what will the weather forecast be in the city?"):
        picked = await index.select(registry, DM, True, message)
        assert picked[: len(ours)] == ours
    first = await index.select(registry, DM, True, "weather forecast for the city")
    outside = [name for name in first if name.startswith("weather_")]
    assert 0 < len(outside) <= 8 and first[: len(ours)] == ours
    # A session that already holds 8 of them is offered no more: the cap is the session's.
    again = await index.select(registry, DM, True, "weather forecast for the city", offered=outside_names(8))
    assert {name for name in again if name.startswith("weather_")} <= outside_names(8)


def outside_names(count: int) -> frozenset[str]:
    return frozenset(f"weather_{n}" for n in range(count))


def test_a_sessions_tool_list_only_grows_and_each_session_has_its_own() -> None:
    picks = StickyPicks(sessions=2)
    assert picks.offer("a", ["reply", "memory_search"]) == ["memory_search", "reply"]
    assert picks.offer("a", ["pin_message"]) == ["memory_search", "pin_message", "reply"]
    assert picks.offer("a", ["reply"]) == ["memory_search", "pin_message", "reply"]  # never cut
    assert picks.so_far("a") == {"memory_search", "pin_message", "reply"}
    assert picks.offer("b", ["reply"]) == ["reply"]
    picks.offer("c", ["reply"])  # a third session: the longest quiet one starts afresh
    assert picks.so_far("a") == frozenset() and picks.so_far("b") == {"reply"}
    assert picks.offer("b", None) is None  # no selector: every allowed tool, nothing kept
