"""tool_config overrides: admin commands change the registry and survive a restart."""

from __future__ import annotations

from pathlib import Path

from teleton.config.schema import Config
from teleton.storage import Database
from teleton.tools.config_store import (
    ToolCommand,
    ToolConfigStore,
    apply_tool_command,
    handle_tool_command,
    parse_tool_command,
)
from teleton.tools.suite import build_registry
from tests.tools.conftest import DM, GROUP, call, make_ctx


def test_parse() -> None:
    assert parse_tool_command("/tools") == ToolCommand("list")
    assert parse_tool_command("/tool disable web_fetch") == ToolCommand("disable", "web_fetch")
    assert parse_tool_command("/tool@teleton_bot enable web_fetch") == ToolCommand("enable", "web_fetch")
    assert parse_tool_command("/tool scope react DM-ONLY") == ToolCommand("scope", "react", "dm-only")
    assert "Unknown scope" in parse_tool_command("/tool scope react everyone")  # type: ignore[operator]
    assert "Usage" in parse_tool_command("/tool frobnicate x")  # type: ignore[operator]
    assert "Usage" in parse_tool_command("/tool disable")  # type: ignore[operator]


def test_apply_is_pure_over_the_registry() -> None:
    registry = build_registry(Config())
    reply, change = apply_tool_command(registry, ToolCommand("disable", "react"))
    assert "react: disabled" in reply and change is not None and change.enabled is False
    assert not registry.allowed("react", GROUP, is_admin=True)
    reply, _ = apply_tool_command(registry, ToolCommand("scope", "react", "dm-only"))
    assert "disabled, scope dm-only" in reply  # a scope change keeps the disabled state
    reply, change = apply_tool_command(registry, ToolCommand("reset", "react"))
    assert change is not None and (change.enabled, change.scope) == (None, None)
    assert registry.enabled("react") and registry.scope_of("react") == "always"
    reply, change = apply_tool_command(registry, ToolCommand("disable", "nope"))
    assert change is None and "No tool" in reply
    listing, _ = apply_tool_command(registry, ToolCommand("list"))
    assert "react [on, always]" in listing and "telegram:" in listing and "memory_read [on, dm-only]" in listing


async def test_overrides_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "teleton.db"
    db = await Database.open(path)
    registry = build_registry(Config())
    store = ToolConfigStore(db)
    assert "web_fetch: disabled" in await handle_tool_command("/tool disable web_fetch", registry, store)
    assert "scope dm-only" in await handle_tool_command("/tool scope get_history dm-only", registry, store)
    await handle_tool_command("/tool scope react admin-only", registry, store)
    await handle_tool_command("/tool scope react always", registry, store)  # back to its default: forgotten
    await db.close()

    db = await Database.open(path)  # the daemon starts again: new database handle, new registry
    try:
        registry = build_registry(Config())
        assert registry.enabled("web_fetch") and registry.scope_of("get_history") == "always"
        applied = await ToolConfigStore(db).load(registry)
        assert applied == 2
        assert not registry.enabled("web_fetch")
        assert registry.scope_of("get_history") == "dm-only"
        assert registry.scope_of("react") == "always"
        # The override is enforced on the call path, not only in the listing.
        from teleton.tools.registry import ToolDeps

        deps = ToolDeps(db=db, workspace=tmp_path)
        result = await call(registry, make_ctx(deps, GROUP, admin=True), "get_history")
        assert result.is_error and "not available" in result.content
        result = await call(registry, make_ctx(deps, DM, admin=True), "web_fetch", url="http://example.com")
        assert result.is_error and "not available" in result.content
        listing = await handle_tool_command("/tools", registry, ToolConfigStore(db))
        assert "web_fetch [OFF, always]" in listing and "get_history [on, dm-only, default always]" in listing
        # Enabling again removes the row instead of storing the default.
        await handle_tool_command("/tool enable web_fetch", registry, ToolConfigStore(db))
        rows = await db.fetchall("select name from tool_config order by name")
        assert [r[0] for r in rows] == ["get_history"]
    finally:
        await db.close()


async def test_override_of_a_tool_that_is_gone_is_kept_but_skipped(db: Database) -> None:
    config = Config()
    config.capabilities.exec.enabled = True
    registry = build_registry(config)
    await handle_tool_command("/tool disable exec", registry, ToolConfigStore(db))
    applied = await ToolConfigStore(db).load(build_registry(Config()))  # exec switched off in the config
    assert applied == 0
    assert len(await ToolConfigStore(db).all()) == 1
