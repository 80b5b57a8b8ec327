"""The tool registry: what tools exist, which a chat may see, and the one door every call goes through.

Each tool declares a name, a description, a JSON schema of its input, a scope and an async handler. Scopes
(DESIGN §10) are enforced twice: when the tool list for a request is built (a group never sees a dm-only
tool) and again when a call arrives (a model that invents a call to a hidden tool is refused). Input is
validated against the schema before the handler runs; a bad input is a clear error result the model can
correct, never an exception.

A call also carries an ``Access``: what this chat may read (DESIGN §8), decided by the agent's privacy gate.
Tools that read memory ask it instead of deciding for themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jsonschema
import structlog

from teleton.gateway.contract import ChatInfo, Gateway, UserInfo
from teleton.llm.tool_loop import ToolCall, ToolResult

log = structlog.get_logger(__name__)

Scope = Literal["always", "dm-only", "group-only", "admin-only"]
SCOPES: tuple[Scope, ...] = ("always", "dm-only", "group-only", "admin-only")


@dataclass(frozen=True)
class Access:
    """What one chat may read. Built by ``teleton.agent.privacy``; tools and context obey it."""

    memory_files: bool  # MEMORY.md, USER.md, STRATEGY.md
    daily_logs: bool
    knowledge: bool  # the knowledge base (chunks of MEMORY.md, memory/*.md, session summaries)
    fact_scopes: tuple[str, ...] | None  # None = every scope
    feed_chats: tuple[int, ...] | None  # None = every chat
    save_scope: str  # where facts learned here are stored

    def may_read_chat(self, chat_id: int) -> bool:
        return self.feed_chats is None or chat_id in self.feed_chats


@dataclass
class ToolDeps:
    """Services tools use, shared by every call. Families added later put theirs in ``extras``."""

    db: Any  # teleton.storage.Database
    workspace: Path
    gateway: Gateway | None = None
    facts: Any = None  # teleton.memory.facts.FactStore
    daily_logs: Any = None  # teleton.memory.daily_logs.DailyLogs
    knowledge: Any = None  # a KnowledgeIndex (add_entry / reindex), when the daemon has one
    embedder: Any = None  # an EmbeddingProvider, or None for keyword-only
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolContext:
    chat: ChatInfo
    sender: UserInfo | None
    is_admin: bool
    access: Access
    deps: ToolDeps
    message_id: int | None = None


Handler = Callable[[dict[str, Any], ToolContext], Awaitable["str | ToolResult"]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    scope: Scope = "always"
    category: str = ""

    def api_schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def scope_allows(scope: Scope, chat_type: str, is_admin: bool) -> bool:
    """Whether a tool of ``scope`` may be offered to / called from this chat. Pure: the rule in one place."""
    if scope == "always":
        return True
    if scope == "dm-only":
        return chat_type == "dm"
    if scope == "group-only":
        return chat_type in ("group", "channel")
    return is_admin  # admin-only


@dataclass(frozen=True)
class Override:
    enabled: bool | None = None
    scope: Scope | None = None


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._overrides: dict[str, Override] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        if tool.scope not in SCOPES:
            raise ValueError(f"tool {tool.name!r}: unknown scope {tool.scope!r}")
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def set_override(self, name: str, *, enabled: bool | None = None, scope: Scope | None = None) -> None:
        """Run-time changes (admin commands; persisted in ``tool_config`` by whoever calls this)."""
        if name not in self._tools:
            raise KeyError(name)
        self._overrides[name] = Override(enabled, scope)

    def scope_of(self, name: str) -> Scope:
        override = self._overrides.get(name)
        return (override.scope if override and override.scope else None) or self._tools[name].scope

    def enabled(self, name: str) -> bool:
        override = self._overrides.get(name)
        return override is None or override.enabled is None or override.enabled

    def allowed(self, name: str, chat: ChatInfo, is_admin: bool) -> bool:
        return name in self._tools and self.enabled(name) and scope_allows(self.scope_of(name), chat.type, is_admin)

    def available(self, chat: ChatInfo, is_admin: bool, names: Sequence[str] | None = None) -> list[Tool]:
        """Tools this chat may use (optionally only ``names``, e.g. a tool-RAG pick), sorted by name so the
        tool list, which comes first in a request, stays identical across turns for prompt caching."""
        wanted = self._tools if names is None else [n for n in names if n in self._tools]
        return [self._tools[n] for n in sorted(wanted) if self.allowed(n, chat, is_admin)]

    def schemas(self, chat: ChatInfo, is_admin: bool, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        return [tool.api_schema() for tool in self.available(chat, is_admin, names)]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:
            return ToolResult.error(f"Unknown tool {call.name!r}.")
        if not self.allowed(call.name, ctx.chat, ctx.is_admin):
            # The model asked for a tool it was not offered (hidden by scope, or disabled).
            log.warning("tool_refused", tool=call.name, chat_type=ctx.chat.type, chat_id=ctx.chat.id)
            return ToolResult.error(f"Tool {call.name!r} is not available in this chat.")
        problem = validation_error(tool.input_schema, call.input)
        if problem:
            return ToolResult.error(f"Invalid input for {call.name}: {problem}")
        outcome = await tool.handler(call.input, ctx)
        return outcome if isinstance(outcome, ToolResult) else ToolResult(str(outcome))


def validation_error(schema: dict[str, Any], value: Any) -> str | None:
    """A short, model-readable description of why ``value`` does not fit ``schema``, or None."""
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.path))
    if not errors:
        return None
    parts = []
    for error in errors[:5]:
        where = "/".join(str(p) for p in error.absolute_path) or "input"
        parts.append(f"{where}: {error.message}")
    return "; ".join(parts)
