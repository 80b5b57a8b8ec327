"""Building the agent from the config: what ``teleton start`` and ``teleton chat`` share.

stack = await build_agent(config, db=db, gateway=gateway, embedder=embedder)
gateway.on_message(stack.agent.handle)      # the Telegram layer's per-chat lanes call this
...
await stack.close()                         # SIGTERM: finish or cancel turns, close the HTTP client
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import structlog

from teleton.agent.deps import PolicyControl, RateCheck, Report, ToolSelector
from teleton.agent.distiller import Distiller
from teleton.agent.media_reader import media_reader
from teleton.agent.runtime import Agent, AgentDeps, AgentSettings, load_owner
from teleton.agent.voice_replies import VoiceReplies
from teleton.config.schema import Config
from teleton.gateway.contract import ChatInfo, Gateway
from teleton.llm.client import LLMClient
from teleton.llm.connect import client_for
from teleton.media.speech import speech_client
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.facts.store import RECALL_PARAMS, FactStore
from teleton.memory.journal.daily_logs import DailyLogs
from teleton.memory.journal.learnings import Learnings
from teleton.memory.knowledge.index import KnowledgeIndex
from teleton.memory.rerank import configured_reranker
from teleton.privacy import Principals
from teleton.providers.extras import MissingExtra, install_command
from teleton.scheduler.scheduler import Scheduler
from teleton.skills.book import SkillBook
from teleton.storage.database import Database
from teleton.tools.config_store import ToolConfigStore
from teleton.tools.outbox import Outbox, OutboxSettings
from teleton.tools.rag import ToolIndex, ToolRagSettings
from teleton.tools.registry import ToolRegistry
from teleton.tools.suite import build_registry

log = structlog.get_logger(__name__)


@dataclass
class AgentStack:
    agent: Agent
    llm: LLMClient
    registry: ToolRegistry
    tool_index: ToolIndex | None = None

    async def close(self, grace_s: float = 5.0) -> None:
        await self.agent.shutdown(grace_s)
        await self.llm.close()
        if self.agent.deps.reranker is not None:
            self.agent.deps.reranker.close()


async def build_agent(
    config: Config,
    *,
    db: Database,
    gateway: Gateway,
    embedder: EmbeddingProvider | None = None,
    knowledge: KnowledgeIndex | None = None,
    policy: PolicyControl | None = None,
    registry: ToolRegistry | None = None,
    llm: LLMClient | None = None,
    principals: Principals | None = None,
    rate_check: RateCheck | None = None,
    report: Report | None = None,
    scheduler: Scheduler | None = None,
    surface: str = "telegram",
) -> AgentStack:
    """The agent for ``config`` (teleton.config.Config). ``embedder`` None = keyword-only retrieval.

    ``principals`` is the one shared record of owner and admins (the daemon's policy gate holds the same
    object, and SIGHUP updates it); by default it is read from ``config.telegram``. ``report`` (kind, error)
    is the daemon's health record, which `teleton status` shows."""
    principals = principals or Principals.from_telegram(config.telegram)
    workspace = config.storage.workspace_dir
    if registry is None:
        registry = build_registry(config)
    await _load_tool_overrides(db, registry)
    index, selector = await _tool_rag(config, db, embedder, registry)
    llm = llm or client_for(config.agent)  # the provider the config names (Anthropic by default)
    settings = AgentSettings.from_config(config)
    search = settings.context.params  # facts are weighed as every other search (memory.*, the model's own)
    facts = FactStore(
        db,
        embedder,
        params=replace(
            RECALL_PARAMS,
            vector_weight=search.vector_weight,
            keyword_weight=search.keyword_weight,
            stemmed_vector_weight=search.stemmed_vector_weight,
        ),
        half_life_days=config.memory.recency_half_life_days,
    )
    learnings, distiller = _distiller(config, llm, facts, workspace, principals, report)
    reranker = await configured_reranker(config.memory.reranker)

    async def tell_owner(text: str) -> None:
        chat = principals.notice_chat()
        if chat is not None:  # plain text: a link in a notice shows its address
            await gateway.send_choice(chat, text, [])

    media = media_reader(config, db, gateway, llm, tell_owner)
    voice, speech_missing = _voice_replies(config, gateway, workspace)
    _warn_missing_voice(media.voice_missing if media is not None else None, speech_missing)
    deps = AgentDeps(
        db=db,
        llm=llm,
        gateway=gateway,
        registry=registry,
        workspace=workspace,
        facts=facts,
        distiller=distiller,
        learnings=learnings,
        daily_logs=DailyLogs(workspace / "memory"),
        embedder=embedder,
        reranker=reranker,
        knowledge=knowledge,
        policy=policy,
        tool_selector=selector,
        owner=await load_owner(db, principals.owner_id),
        surface=surface,
        principals=principals,
        outbox=Outbox(db, gateway, principals, OutboxSettings.from_config(config.privacy, config.storage.data_dir)),
        shared_paths=tuple(config.privacy.shared_paths),
        rate_check=rate_check,
        media=media,
        voice=voice,
        report=report,
        scheduler=scheduler,
        chat_history=config.storage.chat_history_file,
        skills=SkillBook(workspace, db, principals, tuple(config.privacy.shared_paths), tell=tell_owner),
    )
    agent = Agent(deps, settings)
    return AgentStack(agent=agent, llm=llm, registry=registry, tool_index=index)


def _voice_replies(
    config: Config, gateway: Gateway, workspace: Path
) -> tuple[VoiceReplies | None, MissingExtra | None]:
    """The voice replies ``media.voice_replies`` asks for, or None and why not when the voice extra is missing."""
    if config.media.voice_replies == "off":
        return None, None
    try:
        speech = speech_client(config.media.speech)
    except MissingExtra as exc:  # said by _warn_missing_voice
        return None, exc
    except ValueError as exc:  # the daemon answers in text; the log says what to set
        log.error("voice_replies_unavailable", error=str(exc))
        return None, None
    return VoiceReplies(config.media.voice_replies, speech, gateway, workspace), None


def _warn_missing_voice(transcription: MissingExtra | None, speech: MissingExtra | None) -> None:
    """One warning line at start naming every configured voice part the missing voice extra leaves out."""
    parts = [name for name, why in (("transcription", transcription), ("voice replies", speech)) if why is not None]
    if parts:
        log.warning("voice_extra_missing", unavailable=", ".join(parts), fix=install_command("voice"))


def _distiller(
    config: Config,
    llm: LLMClient,
    facts: FactStore,
    workspace: Path,
    principals: Principals,
    report: Report | None,
) -> tuple[Learnings, Distiller]:
    learnings = Learnings(workspace)
    on_error = None if report is None else (lambda exc: report("distiller", exc))
    distiller = Distiller(
        llm, facts, learnings, enabled=config.memory.distill, principals=principals, on_error=on_error
    )
    return learnings, distiller


async def _load_tool_overrides(db: Database, registry: ToolRegistry) -> None:
    try:
        await ToolConfigStore(db).load(registry)
    except Exception as exc:  # a bad override row must not keep the agent from starting
        log.warning("tool_overrides_not_loaded", error=repr(exc))


async def _tool_rag(
    config: Config, db: Database, embedder: EmbeddingProvider | None, registry: ToolRegistry
) -> tuple[ToolIndex | None, ToolSelector | None]:
    index = ToolIndex(db, embedder, ToolRagSettings.from_config(config.tool_rag, config.mcp))
    if config.tool_rag.enabled:
        await index.sync(registry)

    async def select(
        query: str, vector: np.ndarray | None, chat: ChatInfo, is_admin: bool, is_owner: bool, offered: Collection[str]
    ) -> list[str]:
        return await index.select(registry, chat, is_admin, query, vector, is_owner=is_owner, offered=offered)

    # Without tool RAG the selector still offers an outside server's tools only up to mcp.max_offered.
    return (index if config.tool_rag.enabled else None), select
