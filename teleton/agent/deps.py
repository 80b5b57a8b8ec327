"""What the agent is built from: its settings (from the config) and the services the daemon injects."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from teleton.agent.distiller import Distiller
from teleton.agent.media_reader import MediaReader
from teleton.agent.prompt.retrieval import ContextSettings
from teleton.agent.voice_replies import VoiceReplies
from teleton.agent.window.compaction import Thresholds
from teleton.config.schema import AgentConfig, Config, MemoryConfig, default
from teleton.gateway.contract import ChatInfo, Gateway, UserInfo
from teleton.llm.client import LLMClient
from teleton.llm.tool_loop import LoopLimits
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.facts.store import FactStore
from teleton.memory.feed import reads
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.memory.journal.learnings import Learnings
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.recall import Reranker
from teleton.memory.search.hybrid import configured_params
from teleton.privacy import Principals
from teleton.scheduler.scheduler import Scheduler
from teleton.skills.book import SkillBook
from teleton.storage.database import Database
from teleton.tools.families.telegram_actions import SPEAKS_IN_CHAT
from teleton.tools.mcp.servers import McpServers
from teleton.tools.outbox import Outbox
from teleton.tools.registry import ToolRegistry

# Tools that speak in the chat themselves; when the model used one, its final text is not sent again.

# (query, query vector, chat, is_admin, is_owner, the session's tools so far) -> names of the tools to offer
# (added to the session's: ``rag.StickyPicks``), or None for all allowed ones.
ToolSelector = Callable[
    [str, np.ndarray | None, ChatInfo, bool, bool, Collection[str]], Awaitable[Sequence[str] | None]
]
# (chat id, principal id) -> None when a scheduled turn may run now, else which rate limit it hit.
RateCheck = Callable[[int, int | None], str | None]
# (kind, error) -> the daemon's health record (``Supervisor.report``).
Report = Callable[[str, BaseException | str], None]


class PolicyControl(Protocol):
    """What ``/policy`` talks to; the Telegram layer's policy gate implements it."""

    def describe(self) -> str: ...

    def refusals(self) -> str: ...

    def set_policy(self, kind: str, value: str) -> str: ...


@dataclass(frozen=True)
class AgentSettings:
    limits: LoopLimits = field(default_factory=LoopLimits)
    thresholds: Thresholds = field(default_factory=Thresholds)
    context: ContextSettings = field(default_factory=ContextSettings)
    masking_keep: int = default(MemoryConfig, "masking_keep")
    masking_step: int = default(MemoryConfig, "masking_step")
    cache_ttl: str = default(AgentConfig, "cache_ttl")  # how long the provider keeps the prompt cache
    daily_log_lines: int = default(MemoryConfig, "daily_log_lines")
    # tokens of memory one prompt may hold (None: no limit)
    memory_budget: int | None = default(MemoryConfig, "prompt_budget_tokens")
    # the share of it the cached system block may use (``memory_budget``)
    memory_stable_share: float = default(MemoryConfig, "prompt_stable_share")
    salience_threshold: float = default(MemoryConfig, "salience_threshold")
    session_reset_hour: int | None = default(MemoryConfig, "session_reset_hour")
    session_idle_minutes: int | None = default(MemoryConfig, "session_idle_minutes")
    max_input_chars: int = default(AgentConfig, "max_input_chars")
    send_tools: frozenset[str] = SPEAKS_IN_CHAT
    slow_notice_s: float = 0.0  # 0: off; the daemon and `teleton chat` take agent.slow_notice_s (``slow_notice``)

    @classmethod
    def from_config(cls, config: Config) -> AgentSettings:
        a, m = config.agent, config.memory
        return cls(
            limits=LoopLimits(a.max_iterations, a.tool_timeout_s, a.tool_output_cap),
            max_input_chars=a.max_input_chars,
            slow_notice_s=a.slow_notice_s,
            thresholds=Thresholds(
                a.context_window, m.soft_threshold, m.hard_threshold, m.hard_max_messages, m.keep_last
            ),
            context=ContextSettings(
                recent=m.context_recent,
                knowledge=m.context_knowledge,
                feed=m.context_feed,
                message_chars=a.max_input_chars,
                rerank_candidates=m.reranker.candidates,
                params=configured_params(config),
            ),
            masking_keep=m.masking_keep,
            masking_step=m.masking_step,
            cache_ttl=a.cache_ttl,
            daily_log_lines=m.daily_log_lines,
            memory_budget=m.prompt_budget_tokens,
            memory_stable_share=m.prompt_stable_share,
            salience_threshold=m.salience_threshold,
            session_reset_hour=m.session_reset_hour,
            session_idle_minutes=m.session_idle_minutes,
        )


@dataclass
class AgentDeps:
    """What the daemon (or ``teleton chat``) injects."""

    db: Database
    llm: LLMClient
    gateway: Gateway
    registry: ToolRegistry
    workspace: Path
    facts: FactStore | None = None
    daily_logs: DailyLogs | None = None
    embedder: EmbeddingProvider | None = None  # None: keyword-only
    reranker: Reranker | None = None  # memory.reranker: None when off (the default) or not loadable
    knowledge: KnowledgeIndex | None = None
    policy: PolicyControl | None = None
    tool_selector: ToolSelector | None = None
    owner: UserInfo | None = None
    surface: str = "telegram"  # where the owner talks to the agent: "telegram" or "terminal" (`teleton chat`)
    distiller: Distiller | None = None  # facts from each exchange, in the background
    learnings: Learnings | None = None  # tool errors and corrections, for the DM prompt
    principals: Principals = field(default_factory=Principals)  # owner and admins: the one shared source
    outbox: Outbox | None = None  # sends to other chats (held for approval when needed)
    shared_paths: tuple[str, ...] = ()  # privacy.shared_paths
    rate_check: RateCheck | None = None  # the gateway's rate limiter, for scheduled turns
    report: Report | None = None  # (kind, error) -> the daemon's health record
    media: MediaReader | None = None  # photos, voice notes, documents (None: not read)
    voice: VoiceReplies | None = None  # None: media.voice_replies is off
    scheduler: Scheduler | None = None  # where the task tools hand their tasks
    chat_history: Path | None = None  # `teleton chat`'s input history: /forget scrubs it too
    mcp: McpServers | None = None  # outside tool servers, when configured (/mcp)
    skills: SkillBook | None = None  # the workspace's skills (docs/skills.md); None: none are offered
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep  # the wait of the slow notice (a test moves time)


async def load_owner(db: Database, owner_id: int | None) -> UserInfo | None:
    """The owner as the archive knows them (name, username), for the system prompt."""
    if owner_id is None:
        return None
    row = await db.read(lambda conn: reads.user_name(conn, owner_id))
    if row is None:
        return UserInfo(id=owner_id)
    return UserInfo(id=owner_id, first_name=row["first_name"], last_name=row["last_name"], username=row["username"])
