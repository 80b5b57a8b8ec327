"""The tool registry: scopes enforced when listing and when called, schema validation, overrides."""

from __future__ import annotations

from pathlib import Path

from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.llm.tool_loop import ToolCall
from teleton.privacy import Principals
from teleton.storage import Database
from teleton.tools.families.memory import memory_tools
from teleton.tools.registry import Tool, ToolContext, ToolDeps, ToolRegistry, scope_allows

DM = ChatInfo(1, "dm")
GROUP = ChatInfo(-100, "group", "Friends")
PRINCIPALS = Principals(owner_id=DM.id)  # DM is the owner's own chat


async def echo(args: dict, ctx: ToolContext) -> str:
    return f"echo {args['word']}"


def registry() -> ToolRegistry:
    schema = {
        "type": "object",
        "properties": {"word": {"type": "string"}},
        "required": ["word"],
        "additionalProperties": False,
    }
    reg = ToolRegistry(memory_tools())
    reg.register(Tool("echo", "echo a word", schema, echo))
    reg.register(Tool("admin_echo", "echo for admins", schema, echo, scope="admin-only"))
    reg.register(Tool("group_echo", "echo in groups", schema, echo, scope="group-only"))
    return reg


def ctx(chat: ChatInfo, db: Database, tmp_path: Path, admin: bool = False) -> ToolContext:
    return ToolContext(
        chat=chat,
        sender=UserInfo(7),
        is_admin=admin,
        clearance=PRINCIPALS.clearance(chat.id),
        deps=ToolDeps(db=db, workspace=tmp_path, principals=PRINCIPALS),
    )


def test_scope_rule() -> None:
    assert scope_allows("always", "group", False)
    assert scope_allows("dm-only", "dm", False) and not scope_allows("dm-only", "group", True)
    assert scope_allows("group-only", "group", False) and not scope_allows("group-only", "dm", True)
    assert scope_allows("admin-only", "group", True) and not scope_allows("admin-only", "dm", False)


def test_tool_lists_follow_scope() -> None:
    reg = registry()
    group = {t["name"] for t in reg.schemas(GROUP, is_admin=False)}
    assert "memory_read" not in group and "memory_write" not in group and "admin_echo" not in group
    assert {"memory_save", "memory_recall", "memory_search", "echo", "group_echo"} <= group
    dm = [t["name"] for t in reg.schemas(DM, is_admin=True)]
    assert dm == sorted(dm) and "memory_read" in dm and "admin_echo" in dm and "group_echo" not in dm
    assert [t["name"] for t in reg.schemas(DM, True, names=["echo", "nope", "group_echo"])] == ["echo"]


async def test_calls_are_checked_again(db: Database, tmp_path: Path) -> None:
    reg = registry()
    (tmp_path / "MEMORY.md").write_text("secret")
    refused = await reg.execute(ToolCall("t1", "memory_read", {"target": "memory"}), ctx(GROUP, db, tmp_path))
    assert refused.is_error and "not available in this chat" in refused.content
    assert "secret" not in refused.content
    allowed = await reg.execute(ToolCall("t2", "memory_read", {"target": "memory"}), ctx(DM, db, tmp_path))
    assert allowed.content == "secret" and not allowed.is_error
    unknown = await reg.execute(ToolCall("t3", "nope", {}), ctx(DM, db, tmp_path))
    assert unknown.is_error and "Unknown tool" in unknown.content


async def test_bad_input_is_a_clear_error(db: Database, tmp_path: Path) -> None:
    reg = registry()
    bad = await reg.execute(ToolCall("t1", "echo", {"word": 3, "extra": 1}), ctx(DM, db, tmp_path))
    assert bad.is_error and "Invalid input for echo" in bad.content and "word" in bad.content
    missing = await reg.execute(ToolCall("t2", "echo", {}), ctx(DM, db, tmp_path))
    assert missing.is_error and "'word' is a required property" in missing.content


async def test_overrides_disable_and_rescope(db: Database, tmp_path: Path) -> None:
    reg = registry()
    reg.set_override("echo", enabled=False)
    assert "echo" not in {t["name"] for t in reg.schemas(DM, True)}
    assert (await reg.execute(ToolCall("t", "echo", {"word": "x"}), ctx(DM, db, tmp_path, True))).is_error
    reg.set_override("memory_read", scope="always")  # even widened, the tool's own clearance check holds
    (tmp_path / "MEMORY.md").write_text("secret")
    result = await reg.execute(ToolCall("t", "memory_read", {"target": "memory"}), ctx(GROUP, db, tmp_path))
    assert result.is_error and "secret" not in result.content
