"""Scopes over the whole suite: what a chat is not offered, it cannot call by name either."""

from __future__ import annotations

from teleton.config.schema import Config
from teleton.tools.registry import ToolDeps
from teleton.tools.suite import build_registry
from tests.tools.conftest import BOB_DM, DM, GROUP, call, make_ctx


def full_config() -> Config:
    config = Config()
    config.capabilities.exec.enabled = True
    return config


async def test_dm_only_and_admin_only_tools_are_hidden_and_refused(deps: ToolDeps) -> None:
    registry = build_registry(full_config())
    dm_only = [n for n in registry.names if registry.scope_of(n) == "dm-only"]
    admin_only = [n for n in registry.names if registry.scope_of(n) == "admin-only"]
    assert {"list_dialogs", "memory_read", "memory_write"} <= set(dm_only)
    assert {"exec", "kick_user", "ban_user", "unban_user", "workspace_write"} <= set(admin_only)

    offered_in_group = {s["name"] for s in registry.schemas(GROUP, is_admin=True)}
    assert not offered_in_group & set(dm_only)
    offered_to_member = {s["name"] for s in registry.schemas(GROUP, is_admin=False)}
    assert not offered_to_member & (set(dm_only) | set(admin_only))

    group_admin = make_ctx(deps, GROUP, admin=True)
    member_dm = make_ctx(deps, BOB_DM, admin=False)
    for name in dm_only:
        result = await call(registry, group_admin, name)
        assert result.is_error and "not available" in result.content, name
    for name in admin_only:
        result = await call(registry, member_dm, name)
        assert result.is_error and "not available" in result.content, name


async def test_bad_input_is_a_clear_error(deps: ToolDeps) -> None:
    registry = build_registry(full_config())
    result = await call(registry, make_ctx(deps, DM, admin=True), "schedule_task", when="tomorrow")
    assert result.is_error and "description" in result.content and "when" in result.content


def test_every_tool_has_a_category_and_a_useful_description() -> None:
    registry = build_registry(full_config())
    for name in registry.names:
        tool = registry.get(name)
        assert tool is not None and tool.category, name
        assert 30 <= len(tool.description) <= 400, name
