"""Memory tools the model sees: thin wrappers that validate, ask ``Access`` and call the memory layer.

| tool | scope | what |
|---|---|---|
| memory_read | dm-only | MEMORY.md, a day's log, yesterday + today, or the list of memory files |
| memory_write | dm-only | append to MEMORY.md or today's log |
| memory_save | always | save a fact (owner's private scope in a DM, the chat's scope in a group) |
| memory_recall | always | recall facts, only from scopes this chat may read |
| memory_search | always | knowledge + facts + feed, each only as far as this chat may read |
| memory_remove | always | delete a fact by id, only from scopes this chat may read |

Private content is refused twice: the registry hides dm-only tools in groups, and each tool checks the
chat's ``Access`` again, so a tool given a wider scope by an admin override still cannot leak.
"""

from __future__ import annotations

import asyncio
import re
from datetime import date, datetime
from typing import Any

import structlog

from teleton.llm.tool_loop import ToolResult
from teleton.memory.embeddings.query import embed_query
from teleton.memory.facts import GLOBAL_SCOPE, Fact, chat_scope
from teleton.memory.hybrid_search import FEED, KNOWLEDGE, SearchParams, hybrid_search
from teleton.tools.registry import Tool, ToolContext

log = structlog.get_logger(__name__)

MEMORY_FILE = "MEMORY.md"
READ_CAP = 20_000


async def _query_vector(ctx: ToolContext, query: str) -> Any:
    if not getattr(ctx.deps.db, "vectors", False):
        return None
    return await embed_query(ctx.deps.embedder, query)


# -- memory_read -------------------------------------------------------------------------------------
async def memory_read(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    target = args.get("target", "memory")
    if target in ("recent", "list") and not ctx.access.daily_logs:
        return ToolResult.error("Daily logs are private and cannot be read in this chat.")
    if target == "recent":
        days = await ctx.deps.daily_logs.recent(int(args.get("lines", 100)))
        return "\n\n".join(f"## {day.isoformat()}\n{text}" for day, text in days) or "(no log yesterday or today)"
    if target == "list":
        return await asyncio.to_thread(_list_memory_files, ctx.deps.workspace)
    if target == "memory":
        if not ctx.access.memory_files:
            return ToolResult.error("MEMORY.md is private and cannot be read in this chat.")
        path = ctx.deps.workspace / MEMORY_FILE
        text = await asyncio.to_thread(lambda: path.read_text(encoding="utf-8") if path.exists() else "")
        return text[-READ_CAP:] or "(MEMORY.md is empty)"
    if not ctx.access.daily_logs:
        return ToolResult.error("Daily logs are private and cannot be read in this chat.")
    try:
        day = date.fromisoformat(args["date"]) if args.get("date") else datetime.now().astimezone().date()
    except ValueError:
        return ToolResult.error("date must be YYYY-MM-DD")
    text = await ctx.deps.daily_logs.tail(day, int(args.get("lines", 200)))
    return text or f"(no log for {day.isoformat()})"


# -- memory_write ------------------------------------------------------------------------------------
async def memory_write(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    content = args["content"].strip()
    if args.get("target", "daily") == "memory":
        if not ctx.access.memory_files:
            return ToolResult.error("MEMORY.md is private and cannot be written from this chat.")
        path = ctx.deps.workspace / MEMORY_FILE

        def _append() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write(f"\n{content}\n")

        await asyncio.to_thread(_append)
        await _reindex(ctx)
        return "Appended to MEMORY.md."
    if not ctx.access.daily_logs:
        return ToolResult.error("Daily logs are private and cannot be written from this chat.")
    await ctx.deps.daily_logs.append_section("Note", content)
    return "Appended to today's log."


async def _reindex(ctx: ToolContext) -> None:
    # DESIGN §4: a write through a tool is searchable at once.
    index = ctx.deps.knowledge
    if index is None or not hasattr(index, "reindex"):
        return
    try:
        await index.reindex()
    except Exception as exc:  # the file is written; search catches up on the next reindex
        log.warning("knowledge_reindex_failed", error=repr(exc))


# -- memory_save / memory_recall ---------------------------------------------------------------------
async def memory_save(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    if ctx.deps.facts is None:
        return ToolResult.error("Fact memory is not available.")
    fact = Fact(
        value=args["value"],
        category=_slug(args.get("category") or "general"),
        key=_slug(args["key"]) if args.get("key") else None,
        scope=_save_scope(args.get("scope", "private"), ctx),
        source="agent",
        importance=float(args.get("importance", 0.6)),
    )
    outcome = await ctx.deps.facts.save(fact)
    if ctx.access.daily_logs and outcome.action != "duplicate":
        # Seed 002: a saved fact also lands in the daily log, readable by a human and the next session.
        try:
            await ctx.deps.daily_logs.append_section("Saved fact", f"[{fact.category}] {fact.value}")
        except OSError as exc:
            log.warning("daily_log_write_failed", error=repr(exc))
    return {"inserted": "Saved.", "updated": "Updated the existing fact.", "duplicate": "Already known."}[
        outcome.action
    ] + f" (fact #{outcome.id})"


def _save_scope(requested: str, ctx: ToolContext) -> str:
    """Where a fact goes. 'private' is this chat's own place (the owner's private scope in the owner's DM);
    'global' is honoured only where everything may be read (a DM with full access); anything a group
    saves stays in that group's scope, so a group can never write where a DM would read it as private."""
    if requested == "global" and ctx.access.fact_scopes is None:
        return GLOBAL_SCOPE
    if requested == "chat":
        return chat_scope(ctx.chat.id)
    return ctx.access.save_scope


async def memory_remove(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    if ctx.deps.facts is None:
        return ToolResult.error("Fact memory is not available.")
    fact_id = int(args["id"])
    if not await ctx.deps.facts.remove(fact_id, ctx.access.fact_scopes):
        return ToolResult.error(f"No fact #{fact_id} that can be removed from this chat.")
    return f"Removed fact #{fact_id}."


async def memory_recall(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    if ctx.deps.facts is None:
        return ToolResult.error("Fact memory is not available.")
    query = args["query"]
    found = await ctx.deps.facts.recall(
        query,
        ctx.access.fact_scopes,
        limit=int(args.get("limit", 5)),
        category=args.get("category"),
        query_vector=await _query_vector(ctx, query),
    )
    if not found:
        return "No matching facts."
    return "\n".join(f"#{f.id} {f.line()}" for f in found)


# -- memory_search -----------------------------------------------------------------------------------
async def memory_search(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    query = args["query"]
    limit = int(args.get("limit", 5))
    access = ctx.access
    chat_id = args.get("chat_id")
    if chat_id is not None and not access.may_read_chat(int(chat_id)):
        return ToolResult.error("Messages of other chats cannot be searched from this chat.")
    feed_scope = [int(chat_id)] if chat_id is not None else access.feed_chats
    vector = await _query_vector(ctx, query)
    params = SearchParams(limit=limit)

    def _search(conn: Any) -> list[str]:
        lines: list[str] = []
        if access.knowledge and chat_id is None:
            for hit in hybrid_search(conn, KNOWLEDGE, query, vector, params=params):
                lines.append(f"[knowledge {hit.meta['path']}] {hit.text}")
        for hit in hybrid_search(
            conn, FEED, query, vector, params=params, scope=None if feed_scope is None else list(feed_scope)
        ):
            when = datetime.fromtimestamp(hit.meta["date"]).astimezone()
            who = "me" if hit.meta["is_outgoing"] else (hit.meta["sender_name"] or hit.meta["sender_id"])
            lines.append(f"[chat {hit.meta['chat_id']} {when:%Y-%m-%d %H:%M} {who}] {hit.text}")
        return lines

    lines = await ctx.deps.db.read(_search)
    if ctx.deps.facts is not None and chat_id is None:
        for fact in await ctx.deps.facts.recall(query, access.fact_scopes, limit=limit, query_vector=vector):
            lines.append(f"[fact #{fact.id}] {fact.line()}")
    return "\n".join(lines) if lines else "Nothing found."


def _list_memory_files(workspace: Any) -> str:
    files = [workspace / MEMORY_FILE] if (workspace / MEMORY_FILE).exists() else []
    files += sorted((workspace / "memory").glob("*.md"))
    lines = [f"{f.relative_to(workspace)} ({f.stat().st_size} bytes)" for f in files]
    return "\n".join(lines) or "(no memory files yet)"


def _slug(text: str) -> str:
    return re.sub(r"\s+", "_", text.strip().lower())[:64] or "general"


def memory_tools() -> list[Tool]:
    return [
        Tool(
            name="memory_read",
            description=(
                "Read your long-term memory file MEMORY.md, a day's log (memory/YYYY-MM-DD.md), the logs of "
                "yesterday and today, or the list of memory files."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "target": {
                        "type": "string",
                        "enum": ["memory", "daily", "recent", "list"],
                        "description": "memory = MEMORY.md; daily = one day's log; recent = yesterday and "
                        "today; list = the memory files there are",
                    },
                    "date": {"type": "string", "description": "YYYY-MM-DD for target=daily (default today)"},
                    "lines": {"type": "integer", "minimum": 1, "maximum": 1000},
                },
                "required": ["target"],
                "additionalProperties": False,
            },
            handler=memory_read,
            scope="dm-only",
            category="memory",
        ),
        Tool(
            name="memory_write",
            description="Append a note to MEMORY.md (durable, curated knowledge) or to today's log.",
            input_schema={
                "type": "object",
                "properties": {
                    "target": {"type": "string", "enum": ["memory", "daily"]},
                    "content": {"type": "string", "minLength": 1, "maxLength": 20_000},
                },
                "required": ["target", "content"],
                "additionalProperties": False,
            },
            handler=memory_write,
            scope="dm-only",
            category="memory",
        ),
        Tool(
            name="memory_save",
            description=(
                "Save a durable fact (a preference, a name, a date, a decision) to structured memory. Give "
                "a key to make it replace an older value of the same thing."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "value": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "category": {"type": "string", "maxLength": 64},
                    "key": {"type": "string", "maxLength": 64},
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                    "scope": {
                        "type": "string",
                        "enum": ["private", "chat", "global"],
                        "description": "private (default): about the person you serve here; chat: about this "
                        "chat; global: general knowledge (only from a private chat with full access)",
                    },
                },
                "required": ["value"],
                "additionalProperties": False,
            },
            handler=memory_save,
            category="memory",
        ),
        Tool(
            name="memory_recall",
            description="Recall saved facts relevant to a query (e.g. after a reset: 'user's cat name').",
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "category": {"type": "string", "maxLength": 64},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            handler=memory_recall,
            category="memory",
        ),
        Tool(
            name="memory_search",
            description=(
                "Search everything you remember: knowledge files, saved facts and archived Telegram "
                "messages. Give chat_id to search one chat's messages."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "chat_id": {"type": "integer"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
            handler=memory_search,
            category="memory",
        ),
        Tool(
            name="memory_remove",
            description="Delete a saved fact by its id (ids are shown by memory_recall), e.g. when it is wrong.",
            input_schema={
                "type": "object",
                "properties": {"id": {"type": "integer", "minimum": 1}},
                "required": ["id"],
                "additionalProperties": False,
            },
            handler=memory_remove,
            category="memory",
        ),
    ]
