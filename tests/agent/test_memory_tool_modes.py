"""memory_read's recent/list modes, memory_save scopes and memory_remove, each within the chat's access."""

from __future__ import annotations

from pathlib import Path

from teleton.agent.privacy import access_for
from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.llm.tool_loop import ToolCall
from teleton.memory.daily_logs import DailyLogs
from teleton.memory.facts import FactStore
from teleton.storage import Database
from teleton.tools.memory_tools import memory_tools
from teleton.tools.registry import ToolContext, ToolDeps, ToolRegistry

OWNER_DM = ChatInfo(4242, "dm")
GROUP = ChatInfo(-100, "group", "Friends")


def _ctx(chat: ChatInfo, db: Database, workspace: Path, admin: bool) -> ToolContext:
    deps = ToolDeps(db=db, workspace=workspace, facts=FactStore(db), daily_logs=DailyLogs(workspace / "memory"))
    return ToolContext(chat=chat, sender=UserInfo(4242), is_admin=admin, access=access_for(chat, is_admin=admin),
                       deps=deps)  # fmt: skip


async def test_read_recent_and_list(db: Database, tmp_path: Path) -> None:
    reg, ctx = ToolRegistry(memory_tools()), _ctx(OWNER_DM, db, tmp_path, admin=True)
    (tmp_path / "MEMORY.md").write_text("# Memory\n")
    await ctx.deps.daily_logs.append_exchange("ferry at nine?", "Yes, the 9:00 ferry.")
    recent = await reg.execute(ToolCall("t1", "memory_read", {"target": "recent"}), ctx)
    assert "ferry at nine" in recent.content and not recent.is_error
    listing = await reg.execute(ToolCall("t2", "memory_read", {"target": "list"}), ctx)
    assert "MEMORY.md" in listing.content and "memory/" in listing.content


async def test_save_scopes_and_remove(db: Database, tmp_path: Path) -> None:
    reg = ToolRegistry(memory_tools())
    dm, group = _ctx(OWNER_DM, db, tmp_path, admin=True), _ctx(GROUP, db, tmp_path, admin=False)
    await reg.execute(ToolCall("a", "memory_save", {"value": "Water boils at 100 C", "scope": "global"}), dm)
    await reg.execute(ToolCall("b", "memory_save", {"value": "Olga's PIN hint is 'blue'"}), dm)
    await reg.execute(ToolCall("c", "memory_save", {"value": "Meetups are on Tuesdays", "scope": "global"}), group)
    scopes = {r[1]: r[0] for r in await db.fetchall("select scope, value from facts")}
    assert scopes == {"Water boils at 100 C": "global", "Olga's PIN hint is 'blue'": "user",
                      "Meetups are on Tuesdays": "chat:-100"}  # fmt: skip
    private_id = (await db.fetchone("select id from facts where scope = 'user'"))[0]
    refused = await reg.execute(ToolCall("d", "memory_remove", {"id": private_id}), group)
    assert refused.is_error and "PIN" not in refused.content
    assert (await db.fetchone("select count(*) from facts where id = ?", (private_id,)))[0] == 1
    removed = await reg.execute(ToolCall("e", "memory_remove", {"id": private_id}), dm)
    assert removed.content == f"Removed fact #{private_id}."
    assert await FactStore(db).count() == 2


async def test_group_cannot_list_or_read_recent_logs(db: Database, tmp_path: Path) -> None:
    reg = ToolRegistry(memory_tools())
    reg.set_override("memory_read", scope="always")  # even widened by an admin, Access still refuses
    group = _ctx(GROUP, db, tmp_path, admin=False)
    await group.deps.daily_logs.append_exchange("my secret plan", "ok")
    for target in ("recent", "list"):
        result = await reg.execute(ToolCall("t", "memory_read", {"target": target}), group)
        assert result.is_error and "secret" not in result.content
