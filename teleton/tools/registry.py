"""The tool registry: what tools exist, which a chat may see, and the one door every call goes through.

Scopes (docs/tools.md) are enforced when the tool list is built and again when a call arrives; input is
validated against the tool's schema first, a bad one an error result the model can correct. A call carries the
turn's ``Clearance`` and ``Taint`` (docs/privacy.md): a tool that reads records the label of what it returns,
one that sends elsewhere goes through the outbox; ``owner_only`` tools run for the owner's clearance alone,
whatever their scope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import jsonschema
import structlog

from teleton.config.schema import RerankerConfig, default
from teleton.gateway.contract import ChatInfo, Gateway, UserInfo
from teleton.llm.tool_loop import ToolCall, ToolResult
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.facts.store import FactStore
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.memory.journal.learnings import Learnings
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.recall import Reranker
from teleton.memory.search.hybrid import SearchParams
from teleton.privacy import Clearance, Principals, Taint, path_label
from teleton.privacy.egress import Decision
from teleton.scheduler.scheduler import Scheduler
from teleton.skills.book import SkillBook
from teleton.storage.database import Database
from teleton.tools.forget_requests import PendingForgets
from teleton.tools.held import Held, Outgoing

log = structlog.get_logger(__name__)

Scope = Literal["always", "dm-only", "group-only", "admin-only"]
SCOPES: tuple[Scope, ...] = ("always", "dm-only", "group-only", "admin-only")


class Egress(Protocol):
    """The outbox (``tools/outbox.py``) as tools see it: every way out asks it first."""

    def decision(self, ctx: ToolContext, out: Outgoing) -> Decision: ...

    async def check(self, ctx: ToolContext, out: Outgoing) -> tuple[Outgoing, str | None]: ...

    async def send(self, ctx: ToolContext, out: Outgoing) -> str: ...


@dataclass
class ToolDeps:
    """Services tools use, shared by every call."""

    db: Database
    workspace: Path
    gateway: Gateway | None = None
    facts: FactStore | None = None
    daily_logs: DailyLogs | None = None
    knowledge: KnowledgeIndex | None = None  # when the daemon has one
    embedder: EmbeddingProvider | None = None  # None: keyword-only
    principals: Principals = field(default_factory=Principals)  # who the owner and admins are (shared)
    shared_paths: tuple[str, ...] = ()  # privacy.shared_paths: workspace files the owner made public
    outbox: Egress | None = None  # sends to other chats, held for approval when needed
    learnings: Learnings | None = None
    # memory.* search settings (weights, candidates, floor) for the tools' searches, as the turn's own use them
    search: SearchParams = field(default_factory=SearchParams)
    reranker: Reranker | None = None  # memory.reranker: re-orders memory_search's messages as the turn's
    rerank_candidates: int = default(RerankerConfig, "candidates")
    scheduler: Scheduler | None = None  # where task tools hand their tasks (None: stored, run at the next start)
    forget_requests: PendingForgets = field(default_factory=PendingForgets)  # waiting for /forget confirm
    chat_history: Path | None = None  # `teleton chat`'s input history: what forget looks in too
    skills: SkillBook | None = None  # skill_read, skill_propose (docs/skills.md)

    def label_of_path(self, rel: Any) -> str:
        return path_label(rel, self.principals, self.shared_paths)


@dataclass
class Narrowing:
    """What a turn may still call once it read skills with ``allowed-tools``: each one narrows, none widens."""

    allowed: frozenset[str] | None = None  # None: nothing narrowed
    by: tuple[str, ...] = ()  # the skills that narrowed it

    def narrow(self, skill: str, names: Iterable[str]) -> None:
        names = frozenset(names) | SKILL_TOOLS
        self.allowed = names if self.allowed is None else self.allowed & names
        self.by = (*self.by, skill)

    def permits(self, name: str) -> bool:
        return self.allowed is None or name in self.allowed


SKILL_TOOLS = frozenset({"skill_read"})  # a narrowed turn may still read the skills it follows


@dataclass(frozen=True)
class ToolContext:
    chat: ChatInfo
    sender: UserInfo | None
    is_admin: bool
    clearance: Clearance
    deps: ToolDeps
    message_id: int | None = None
    taint: Taint = field(default_factory=Taint)
    # Sends to the turn's own chat (the runtime's, which writes the delivery record first); None: straight
    # to the gateway (tool tasks, tests).
    say: Callable[[str, int | None], Awaitable[Any]] | None = None
    from_task: bool = False  # a scheduled task's turn or tool call (what it schedules is rate-bound)
    # What the speaker typed in this turn's message ("" for scheduled work): a URL or a command found in it
    # exactly may go out even from a turn something else steered (``teleton.privacy.egress``).
    typed: str = ""
    topic_id: int | None = None  # the forum topic of the turn's message (its conversation inside the chat)
    narrowing: Narrowing = field(default_factory=Narrowing)  # by the skills this turn read

    def __post_init__(self) -> None:
        self.taint.add(self.clearance.label)  # a turn has always seen its own chat

    def shown(self, *labels: str) -> None:
        """Record that this turn's model is being shown items of ``labels`` (for the egress check)."""
        self.taint.add(*labels)

    def saw(self, *origins: str) -> None:
        """Record that outside content (a fetched page, a document, a command's output) is being shown."""
        self.taint.saw(*origins)


Handler = Callable[[dict[str, Any], ToolContext], Awaitable["str | ToolResult"]]
Release = Callable[["Held", ToolDeps], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    scope: Scope = "always"
    category: str = ""
    owner_only: bool = False  # only for the owner's clearance (its DM, `teleton chat`), whatever the scope
    # Carries out an item of this tool the owner approved (``teleton.tools.outbox``): from its held bytes only.
    release: Release | None = None
    # The origin its own words carry into a turn it is offered to: an outside server's description and schema
    # the owner did not approve as they are (``tools.mcp.pins``) steer that turn like a fetched page.
    steers: str = ""

    @property
    def outside(self) -> bool:
        """An outside server's tool (``tools.mcp``): ranked like ours, but never offered unranked."""
        return self.category.startswith("mcp:")

    def api_schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


def schema(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A tool's input schema: an object of these properties, nothing else admitted."""
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


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

    def unregister(self, name: str) -> None:
        """Take a tool out (an outside server's, when it goes away); its overrides stay for its return."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def tools(self) -> list[Tool]:
        return [self._tools[name] for name in self.names]

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

    def allowed(self, name: str, chat: ChatInfo, is_admin: bool, *, is_owner: bool = False) -> bool:
        tool = self._tools.get(name)
        if tool is None or not self.enabled(name) or (tool.owner_only and not is_owner):
            return False
        return scope_allows(self.scope_of(name), chat.type, is_admin)

    def available(
        self, chat: ChatInfo, is_admin: bool, names: Sequence[str] | None = None, *, is_owner: bool = False
    ) -> list[Tool]:
        """Tools this chat may use (optionally only ``names``, e.g. a tool-RAG pick), sorted by name so the
        tool list, which comes first in a request, stays identical across turns for prompt caching."""
        wanted = self._tools if names is None else [n for n in names if n in self._tools]
        return [self._tools[n] for n in sorted(wanted) if self.allowed(n, chat, is_admin, is_owner=is_owner)]

    def schemas(
        self, chat: ChatInfo, is_admin: bool, names: Sequence[str] | None = None, *, is_owner: bool = False
    ) -> list[dict[str, Any]]:
        return [tool.api_schema() for tool in self.available(chat, is_admin, names, is_owner=is_owner)]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:
            return ToolResult.error(f"Unknown tool {call.name!r}.")
        if not self.allowed(call.name, ctx.chat, ctx.is_admin, is_owner=ctx.clearance.is_owner):
            # The model asked for a tool it was not offered (hidden by scope, or disabled).
            log.warning("tool_refused", tool=call.name, chat_type=ctx.chat.type, chat_id=ctx.chat.id)
            return ToolResult.error(f"Tool {call.name!r} is not available in this chat.")
        if not ctx.narrowing.permits(call.name):
            names = ", ".join(sorted(ctx.narrowing.allowed or ()))
            return ToolResult.error(
                f"Tool {call.name!r} is not among the tools the skill {', '.join(ctx.narrowing.by)} allows in this "
                f"conversation: {names}."
            )
        problem = validation_error(tool.input_schema, call.input)
        if problem:
            return ToolResult.error(f"Invalid input for {call.name}: {problem}")
        outcome = await tool.handler(call.input, ctx)
        result = outcome if isinstance(outcome, ToolResult) else ToolResult(str(outcome))
        ctx.taint.absorb(result.content)  # words quoted from elsewhere in a result steer like any others
        return result


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
