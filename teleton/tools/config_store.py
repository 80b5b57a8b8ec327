"""Run-time tool overrides (enabled, scope): the ``tool_config`` table and the admin commands that change it.

The daemon loads the stored overrides into the registry at start (``ToolConfigStore.load``); the admin
commands ``/tools`` and ``/tool enable|disable|scope NAME …`` change the registry and the table together,
so a change survives a restart. The command text is parsed and answered by pure functions; only
``handle_tool_command`` touches the database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import structlog

from teleton.storage.database import Database
from teleton.text.counts import counted
from teleton.tools.registry import SCOPES, Scope, ToolRegistry

log = structlog.get_logger(__name__)

USAGE = (
    "Usage: /tools — list tools\n"
    "/tool enable NAME | /tool disable NAME | /tool scope NAME always|dm-only|group-only|admin-only\n"
    "/tool reset NAME — back to the built-in settings"
)


@dataclass(frozen=True)
class StoredOverride:
    name: str
    enabled: bool | None
    scope: Scope | None


class ToolConfigStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def all(self) -> list[StoredOverride]:
        rows = await self.db.fetchall("select name, enabled, scope from tool_config order by name")
        return [StoredOverride(r[0], None if r[1] is None else bool(r[1]), r[2]) for r in rows]

    async def load(self, registry: ToolRegistry) -> int:
        """Apply every stored override to ``registry``; overrides of tools that no longer exist are kept
        (the tool may come back when a capability is switched on again) but skipped. Returns how many."""
        applied = 0
        for row in await self.all():
            if registry.get(row.name) is None:
                log.info("tool_override_skipped", tool=row.name, reason="tool not registered")
                continue
            registry.set_override(row.name, enabled=row.enabled, scope=row.scope)
            applied += 1
        return applied

    async def save(self, name: str, *, enabled: bool | None, scope: Scope | None) -> None:
        if enabled is None and scope is None:
            await self.db.execute("delete from tool_config where name = ?", (name,))
            return
        await self.db.execute(
            "insert into tool_config(name, enabled, scope, updated_at) values (?, ?, ?, ?) "
            "on conflict(name) do update set enabled = excluded.enabled, scope = excluded.scope, "
            "updated_at = excluded.updated_at",
            (name, None if enabled is None else int(enabled), scope, time.time()),
        )


# -- the admin commands (pure) ------------------------------------------------------------------------

Action = Literal["list", "enable", "disable", "scope", "reset"]


@dataclass(frozen=True)
class ToolCommand:
    action: Action
    name: str = ""
    scope: Scope | None = None


def parse_tool_command(text: str) -> ToolCommand | str:
    """``/tools`` or ``/tool …`` -> a command, or a string explaining what is wrong."""
    words = text.strip().split()
    if not words:
        return USAGE
    head = words[0].split("@", 1)[0].lower()  # "/tool@MyBot" in groups
    if head == "/tools" and len(words) == 1:
        return ToolCommand("list")
    if head != "/tool" or len(words) < 3:
        return USAGE
    verb, name = words[1].lower(), words[2]
    if verb in ("enable", "disable", "reset") and len(words) == 3:
        return ToolCommand(verb, name)  # type: ignore[arg-type]
    if verb == "scope" and len(words) == 4:
        scope = words[3].lower()
        if scope not in SCOPES:
            return f"Unknown scope {scope!r}; use one of: {', '.join(SCOPES)}."
        return ToolCommand("scope", name, scope)
    return USAGE


def render_tools(registry: ToolRegistry) -> str:
    """The /tools answer: every tool with its effective scope and state, grouped by category."""
    by_category: dict[str, list[str]] = {}
    for name in registry.names:
        tool = registry.get(name)
        assert tool is not None
        scope = registry.scope_of(name)
        marks: list[str] = [scope]
        if scope != tool.scope:
            marks.append(f"default {tool.scope}")
        state = "on" if registry.enabled(name) else "OFF"
        by_category.setdefault(tool.category or "other", []).append(f"  - {name} [{state}, {', '.join(marks)}]")
    lines = [f"{counted(len(registry.names), 'tool')}:"]
    for category in sorted(by_category):
        lines.append(f"- {category}:")
        lines.extend(by_category[category])
    return "\n".join(lines)


def apply_tool_command(registry: ToolRegistry, command: ToolCommand) -> tuple[str, StoredOverride | None]:
    """Change ``registry`` as ``command`` says; return the reply and the override to persist (None: nothing
    to persist). Only the registry is touched, so this is testable without a database."""
    if command.action == "list":
        return render_tools(registry), None
    tool = registry.get(command.name)
    if tool is None:
        return f"No tool named {command.name!r}. /tools lists them.", None
    enabled: bool | None = None if registry.enabled(command.name) else False
    current_scope = registry.scope_of(command.name)
    scope: Scope | None = current_scope if current_scope != tool.scope else None
    if command.action == "enable":
        enabled = None  # enabled is the default state; nothing to remember
    elif command.action == "disable":
        enabled = False
    elif command.action == "scope":
        scope = None if command.scope == tool.scope else command.scope
    else:  # reset
        enabled, scope = None, None
    registry.set_override(command.name, enabled=enabled, scope=scope)
    state = "enabled" if registry.enabled(command.name) else "disabled"
    reply = f"{command.name}: {state}, scope {registry.scope_of(command.name)}."
    return reply, StoredOverride(command.name, enabled, scope)


async def handle_tool_command(text: str, registry: ToolRegistry, store: ToolConfigStore) -> str:
    """What the agent's command dispatcher calls for an admin's ``/tools`` or ``/tool …``; returns the reply."""
    command = parse_tool_command(text)
    if isinstance(command, str):
        return command
    reply, change = apply_tool_command(registry, command)
    if change is not None:
        await store.save(change.name, enabled=change.enabled, scope=change.scope)
        log.info("tool_override", tool=change.name, enabled=change.enabled, scope=change.scope)
    return reply
