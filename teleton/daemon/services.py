"""What `teleton start` and `teleton chat` both build from the config: the store, the agent, the feed's
embedder and the outside tool servers, each one's stop registered on the run's ``Lifecycle`` as it starts
(docs/architecture.md, "Start and stop")."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from teleton.agent.factory import AgentStack, build_agent
from teleton.config.schema import Config
from teleton.daemon.health import open_checked
from teleton.daemon.outside_servers import start_mcp
from teleton.gateway.contract import Gateway
from teleton.memory.embeddings import with_cache
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.feed.embedding import FeedEmbedder
from teleton.process.lifecycle import Lifecycle
from teleton.process.supervisor import Supervisor
from teleton.storage.database import Database
from teleton.tools.mcp.servers import McpServers, Tell


@dataclass(frozen=True)
class Store:
    db: Database
    provider: EmbeddingProvider | None  # the model itself: the feed's (every message is new text, never cached)
    embedder: EmbeddingProvider | None  # through the cache: knowledge, queries, tools; None without vectors


async def open_store(life: Lifecycle, config: Config, provider: EmbeddingProvider | None, *, check: bool) -> Store:
    """The database (``check``: its pages checked before anything uses it) and the embedders over it."""
    dims = getattr(provider, "dims", None)  # a remote model's is known once it has answered
    embedding = (provider.model_id, dims) if provider is not None and dims else None
    db = await open_checked(config.storage.database_file, embedding, check=check)
    life.on_stop("database", db.close)  # the last to stop: every step before it can still write
    embedder = with_cache(provider, db, config.embedding) if provider is not None and db.vectors else None
    return Store(db, provider if embedder is not None else None, embedder)


async def open_agent(life: Lifecycle, config: Config, store: Store, gateway: Gateway, **parts: Any) -> AgentStack:
    """The agent over ``store`` answering through ``gateway``; ``parts``: the rest of ``build_agent``'s."""
    stack = await build_agent(config, db=store.db, gateway=gateway, embedder=store.embedder, **parts)
    life.on_stop("agent", partial(stack.close, 1.0))
    return stack


def start_feed_embedder(
    life: Lifecycle, store: Store, *, batch: int, flush_s: float, supervisor: Supervisor | None = None
) -> FeedEmbedder | None:
    """Archived messages embedded in the background (None: keyword-only); its stop flushes what is queued."""
    if store.provider is None:
        return None
    embedder = FeedEmbedder(store.db, store.provider, batch=batch)
    embedder.start(supervisor)
    life.on_stop("feed embedder", partial(embedder.stop, flush_s))
    return embedder


def start_outside_servers(
    life: Lifecycle, config: Config, stack: AgentStack, db: Database, tell: Tell
) -> McpServers | None:
    """The MCP servers, connecting in the background (their tools join as they do); None when none is set."""
    servers = start_mcp(config, stack, db, tell)
    if servers is not None:
        life.on_stop("mcp servers", servers.stop)
    return servers
