"""Tool RAG: pick the tools worth offering for one message (docs/tools.md).

``tool_index`` holds one row per tool (a search text from its name, description and input fields), mirrored
into FTS5 and ``tool_index_vec``; a sync re-embeds only the tools whose hash changed. Per message the shared
hybrid search ranks them, tools the chat may not use are dropped and the always-include set is added; when
nothing is found every one of our own tools is offered, an outside server's only when it ranks. A session's
list only grows (``StickyPicks``; docs/memory.md, "What the cache serves"). The caller passes the message's
query vector, shared with memory retrieval.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import structlog

from teleton.config.schema import McpConfig, ToolRagConfig, default
from teleton.gateway.contract import ChatInfo
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.memory.embeddings.query import embed_query
from teleton.memory.search.corpora import TOOLS
from teleton.memory.search.hybrid import SearchParams, hybrid_search
from teleton.memory.search.vector_leg import vector_available
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection
from teleton.tools.registry import Tool, ToolRegistry

log = structlog.get_logger(__name__)

EMBED_GROUP = 8
SEARCH_TEXT_CAP = 600  # characters: name, description and the main field docs; the rest adds noise, not recall


@dataclass(frozen=True)
class ToolRagSettings:
    enabled: bool = True
    top_k: int = 25
    vector_weight: float = 0.6
    keyword_weight: float = 0.4
    # Unlike memory search (0.15), no floor: a tool ranked in the top k is offered even on a weak score,
    # because a missing tool stops the model from acting while an extra one costs only a few tokens.
    min_score: float = 0.0
    always_include: tuple[str, ...] = ("send_message", "reply", "memory_search")
    max_outside: int = default(McpConfig, "max_offered")  # outside servers' tools in one session's list
    session_tools: str = default(ToolRagConfig, "session_tools")  # "all" of ours, or "picked" by rank

    @classmethod
    def from_config(cls, cfg: ToolRagConfig, mcp: McpConfig | None = None) -> ToolRagSettings:
        """From ``config.tool_rag`` and ``config.mcp`` (teleton.config.schema)."""
        return cls(
            enabled=cfg.enabled,
            top_k=cfg.top_k,
            vector_weight=cfg.vector_weight,
            keyword_weight=cfg.keyword_weight,
            always_include=tuple(cfg.always_include),
            max_outside=(mcp or McpConfig()).max_offered,
            session_tools=cfg.session_tools,
        )


@dataclass
class SyncReport:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    embedded: int = 0


def tool_hash(tool: Tool) -> str:
    doc = json.dumps([tool.name, tool.description, tool.input_schema], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(doc.encode()).hexdigest()


def search_text(tool: Tool) -> str:
    """What retrieval matches a message against: the name as words, the description, the field docs."""
    parts = [tool.name.replace("_", " "), tool.description]
    for key, prop in (tool.input_schema.get("properties") or {}).items():
        doc = prop.get("description") if isinstance(prop, dict) else None
        parts.append(f"{key.replace('_', ' ')}: {doc}" if doc else key.replace("_", " "))
    return re.sub(r"\s+", " ", ". ".join(parts)).strip()[:SEARCH_TEXT_CAP]


@dataclass(frozen=True)
class _Row:
    name: str
    description: str
    text: str
    hash: str


def _write_index(conn: Connection, rows: list[_Row], report: SyncReport, vectors: bool) -> None:
    existing = {r[0]: (int(r[1]), r[2]) for r in conn.execute("select name, id, hash from tool_index")}
    now = time.time()
    wanted = {row.name for row in rows}
    for name, (row_id, _) in existing.items():
        if name not in wanted:
            conn.execute("delete from tool_index where id = ?", (row_id,))
            if vectors:
                conn.execute("delete from tool_index_vec where id = ?", (row_id,))
            report.removed.append(name)
    for row in rows:
        old = existing.get(row.name)
        if old is None:
            conn.execute(
                "insert into tool_index(name, description, search_text, hash, embedded, updated_at) "
                "values (?, ?, ?, ?, 0, ?)",
                (row.name, row.description, row.text, row.hash, now),
            )
            report.added.append(row.name)
        elif old[1] != row.hash:
            conn.execute(
                "update tool_index set description = ?, search_text = ?, hash = ?, embedded = 0, "
                "updated_at = ? where id = ?",
                (row.description, row.text, row.hash, now, old[0]),
            )
            report.changed.append(row.name)


def _pending(conn: Connection) -> list[tuple[int, str]]:
    return [(int(r[0]), r[1]) for r in conn.execute("select id, search_text from tool_index where embedded = 0")]


def _store_vectors(conn: Connection, ids: Sequence[int], vectors: np.ndarray) -> None:
    for row_id, vector in zip(ids, vectors, strict=True):
        conn.execute("delete from tool_index_vec where id = ?", (row_id,))
        conn.execute(
            "insert into tool_index_vec(id, embedding) values (?, ?)",
            (row_id, np.asarray(vector, dtype=np.float32).tobytes()),
        )
        conn.execute("update tool_index set embedded = 1 where id = ?", (row_id,))


class ToolIndex:
    """The tool index of one database. ``embedder`` is an EmbeddingProvider or None (keyword only)."""

    def __init__(
        self, db: Database, embedder: EmbeddingProvider | None = None, settings: ToolRagSettings = ToolRagSettings()
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.settings = settings
        self._indexed: frozenset[str] | None = None  # names at the last sync, to spot a stale index

    def _vectors_on(self) -> bool:
        return self.embedder is not None and bool(getattr(self.db, "vectors", False))

    async def sync(self, registry: ToolRegistry) -> SyncReport:
        """Bring the index in line with ``registry``: call at start and whenever tools change."""
        rows = []
        for name in registry.names:
            tool = registry.get(name)
            assert tool is not None
            rows.append(_Row(name, tool.description, search_text(tool), tool_hash(tool)))
        report = SyncReport()
        embedder = self.embedder if self._vectors_on() else None
        vectors = embedder is not None and await self.db.read(lambda c: vector_available(c, TOOLS))
        await self.db.write(lambda conn: _write_index(conn, rows, report, vectors))
        if embedder is not None and vectors:
            pending = await self.db.read(_pending)
            # Similar lengths together, in small groups: a batch is padded to its longest text, and one
            # long tool text would otherwise make every short one cost as much as itself.
            pending.sort(key=lambda item: len(item[1]))
            for start in range(0, len(pending), EMBED_GROUP):
                group = pending[start : start + EMBED_GROUP]
                embedded = await embedder.embed([text for _, text in group])
                ids = [row_id for row_id, _ in group]
                await self.db.write(partial(_store_vectors, ids=ids, vectors=embedded))
                report.embedded += len(group)
        self._indexed = frozenset(row.name for row in rows)
        if report.added or report.changed or report.removed:
            log.info(
                "tool_index_synced",
                added=len(report.added),
                changed=len(report.changed),
                removed=len(report.removed),
                embedded=report.embedded,
            )
        return report

    async def rank(self, query: str, query_vector: np.ndarray | None = None) -> list[tuple[str, float]]:
        """Every tool that matches ``query`` at all, best first, with its fused score."""
        if query_vector is None and self._vectors_on():
            query_vector = await embed_query(self.embedder, query)  # None on failure: keyword-only
        if not self._vectors_on():
            query_vector = None
        count = await self.db.read(lambda c: int(c.execute("select count(*) from tool_index").fetchone()[0]))
        if count == 0:
            return []
        params = SearchParams(
            vector_weight=self.settings.vector_weight,
            keyword_weight=self.settings.keyword_weight,
            vector_candidates=count,
            keyword_candidates=count,
            limit=count,
            min_score=self.settings.min_score,
        )
        hits = await self.db.read(lambda conn: hybrid_search(conn, TOOLS, query, query_vector, params=params))
        return [(hit.meta["name"], hit.score) for hit in hits]

    async def select(
        self,
        registry: ToolRegistry,
        chat: ChatInfo,
        is_admin: bool,
        query: str,
        query_vector: np.ndarray | None = None,
        *,
        is_owner: bool = False,
        offered: Collection[str] = (),
    ) -> list[str]:
        """Names of the tools to offer for this message in this chat, besides the session's ``offered`` so far
        (give them to ``registry.schemas``)."""
        tools = registry.available(chat, is_admin, is_owner=is_owner)
        outside = {tool.name for tool in tools if tool.outside}
        ours = [tool.name for tool in tools if not tool.outside]
        allowed = {tool.name for tool in tools}
        if self.settings.session_tools == "all" and not outside:
            return ours  # nothing to rank: a search per message saved
        top = len(tools)
        if not self.settings.enabled:  # every tool, an outside server's up to the cap (by name)
            ranked_names = [tool.name for tool in tools]
        else:
            ranked_names = [name for name, _ in await self.rank(query, query_vector) if name in allowed]
            if ranked_names:
                top = self.settings.top_k
            else:  # nothing ranked: all of ours, none of an outside server's
                ranked_names = ours
        picked: list[str] = []
        room = self.settings.max_outside - len(outside.intersection(offered))
        for name in ranked_names:
            if len(picked) >= top:
                break
            if name in outside and name not in offered:
                if room <= 0:
                    continue
                room -= 1
            picked.append(name)
        if self.settings.session_tools == "all":  # every one of ours, and the outside tools that ranked
            picked = [*ours, *(name for name in picked if name in outside)]
        for name in self.settings.always_include:
            if name in allowed and name not in picked:
                picked.append(name)
        if self._indexed is not None:
            # One of ours registered after the last sync cannot be ranked yet; offer it rather than hide it.
            picked += [name for name in ours if name not in self._indexed and name not in picked]
        return picked


class StickyPicks:
    """A session's tool list: tool RAG's picks, grown over the session and never cut.

    The tool list is the first thing in a request, so any change to it misses the prompt cache for everything
    after it; a list that only grows changes only when a new tool becomes relevant (with ``session_tools:
    all``, when an outside server's tool first ranks). A new session starts its own.
    """

    def __init__(self, sessions: int = 2_000) -> None:
        self.sessions = sessions  # sessions whose lists are kept (one per active chat): the daemon runs for months
        self._offered: OrderedDict[str, list[str]] = OrderedDict()

    def so_far(self, session_id: str) -> frozenset[str]:
        return frozenset(self._offered.get(session_id, ()))

    def offer(self, session_id: str, picked: Sequence[str] | None) -> list[str] | None:
        if picked is None:
            return None
        offered = self._offered.pop(session_id, [])
        offered += [name for name in picked if name not in offered]
        self._offered[session_id] = offered
        while len(self._offered) > self.sessions:  # a long-quiet session just starts a new list
            self._offered.popitem(last=False)
        return sorted(offered)

    def forget(self, session_id: str) -> None:
        self._offered.pop(session_id, None)
