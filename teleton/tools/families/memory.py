"""Memory tools the model sees: thin wrappers that validate, ask the turn's clearance and call the memory layer.

The registry's scope is the first gate (the tools and their scopes: docs/tools.md, "Memory and workspace
tools"); the second is in each handler: the owner's files need the owner's clearance, every search runs inside
the clearance, everything returned is recorded in the turn's taint, and what came from another chat or person
is shown quoted with its origin (docs/privacy.md).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import date, datetime
from typing import Any

import structlog

from teleton.llm.tool_loop import ToolResult
from teleton.memory import recall
from teleton.memory.facts.sources import link
from teleton.memory.facts.store import Fact
from teleton.memory.facts.subjects import chat_members, resolve, shown_subjects, speaker_subject
from teleton.memory.knowledge.files import knowledge_files
from teleton.memory.recall import Question
from teleton.privacy import OWNER, PUBLIC
from teleton.privacy.paths import is_document
from teleton.privacy.quoting import forwarded, mark, outside, shown_to
from teleton.storage.private_files import write_private
from teleton.tools.families.archive_order import archive_messages, query_vector
from teleton.tools.held import Held, Outgoing
from teleton.tools.outbox import EgressRefused, gate
from teleton.tools.registry import Tool, ToolContext, ToolDeps, schema

log = structlog.get_logger(__name__)

MEMORY_FILE = "MEMORY.md"
READ_CAP = 20_000
OWNER_ONLY = "{what} is the owner's and cannot be {done} in this chat."
SLUG_MAX = 64  # characters of a fact's category or key, as saved and as the schema tells the model
SLUG = {"type": "string", "maxLength": SLUG_MAX}
QUERY = {"type": "string", "minLength": 1, "maxLength": 2000}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 20}


# -- memory_read -------------------------------------------------------------------------------------
async def memory_read(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    target = args.get("target", "memory")
    if not ctx.clearance.is_owner:
        what = "MEMORY.md" if target == "memory" else "The daily log"
        return ToolResult.error(OWNER_ONLY.format(what=what, done="read"))
    ctx.shown(OWNER)
    if target == "list":
        return await asyncio.to_thread(_list_memory_files, ctx.deps.workspace)
    if target == "memory":
        path = ctx.deps.workspace / MEMORY_FILE
        text = await asyncio.to_thread(lambda: path.read_text(encoding="utf-8") if path.exists() else "")
        return text[-READ_CAP:] or "(MEMORY.md is empty)"
    logs = ctx.deps.daily_logs
    if logs is None:
        return ToolResult.error("The daily log is not available.")
    if target == "recent":
        days = await logs.recent(int(args.get("lines", 100)))
        return "\n\n".join(f"## {day.isoformat()}\n{text}" for day, text in days) or "(no log yesterday or today)"
    try:
        day = date.fromisoformat(args["date"]) if args.get("date") else datetime.now().astimezone().date()
    except ValueError:
        return ToolResult.error("date must be YYYY-MM-DD")
    text = await logs.tail(day, int(args.get("lines", 200)))
    return text or f"(no log for {day.isoformat()})"


# -- memory_write ------------------------------------------------------------------------------------
async def memory_write(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    target = args.get("target", "daily")
    if not ctx.clearance.is_owner:
        what = "MEMORY.md" if target == "memory" else "The daily log"
        return ToolResult.error(OWNER_ONLY.format(what=what, done="written"))
    # What a steered turn notes keeps its origin: it must not come back later as the owner's own words.
    content = mark(args["content"].strip(), ctx.taint.steering(ctx.clearance.label))
    if target == "memory":
        path = ctx.deps.workspace / MEMORY_FILE
        await asyncio.to_thread(write_private, path, f"\n{content}\n", append=True)
        await _reindex(ctx)
        return "Appended to MEMORY.md."
    if ctx.deps.daily_logs is None:
        return ToolResult.error("The daily log is not available.")
    await ctx.deps.daily_logs.append_section("Note", content)
    return "Appended to today's log."


async def _reindex(ctx: ToolContext) -> None:
    # docs/memory.md: a write through a tool is searchable at once.
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
    visibility = args.get("visibility", "private")
    if visibility == "public" and not ctx.clearance.is_owner:
        return ToolResult.error("Only the owner, in their own chat, can make a fact public.")
    value = args["value"]
    if visibility == "public":  # every chat will read it: the egress rule
        # Every chat reads the category and the key beside the value: the owner is shown them as they'll be saved.
        meta: dict[str, Any] = {k: args[k] for k in ("importance",) if k in args}
        meta["category"] = _slug(args.get("category") or "general")
        if args.get("key"):
            meta["key"] = _slug(args["key"])
        out, stop = await gate(ctx, Outgoing("fact", value.encode(), label=PUBLIC, meta=meta, tool="memory_save"))
        if stop is not None:
            return stop
        value = out.text  # as it may leave: without invisible characters
    else:
        value = mark(value, ctx.taint.steering(ctx.clearance.label))
    speaker = _asker(ctx)
    fact = Fact(
        value=value,
        category=_slug(args.get("category") or "general"),
        key=_slug(args["key"]) if args.get("key") else None,
        # The write rule: what a turn saves carries its own label (a group can only write its own).
        scope=PUBLIC if visibility == "public" else ctx.clearance.label,
        source="agent",
        importance=float(args.get("importance", 0.6)),
        subject=resolve(args.get("about"), speaker, ctx.chat.id, {}),
        replaces=args.get("replaces"),
        said_by=speaker or ctx.clearance.label,
    )
    outcome = await ctx.deps.facts.save(fact)
    message_id = ctx.message_id or 0
    if visibility != "public" and message_id > 0 and not ctx.from_task:  # the person's message it was saved for
        await ctx.deps.db.write(lambda conn: link(conn, outcome.id, ctx.chat.id, [message_id]))
    if ctx.clearance.is_owner and outcome.action != "duplicate" and ctx.deps.daily_logs is not None:
        # A saved fact also lands in the daily log, readable by a human and the next session (docs/memory.md).
        try:
            await ctx.deps.daily_logs.append_section("Saved fact", f"[{fact.category}] {fact.value}")
        except OSError as exc:
            log.warning("daily_log_write_failed", error=repr(exc))
    if outcome.action == "superseded":
        return f"Saved (fact #{outcome.id}); it replaces fact #{outcome.replaced}, kept as history."
    return {"inserted": "Saved.", "updated": "Updated the existing fact.", "duplicate": "Already known."}[
        outcome.action
    ] + f" (fact #{outcome.id})"


async def release_fact(item: Held, deps: ToolDeps) -> str:
    """A public fact the owner approved: exactly the value shown."""
    if deps.facts is None:
        raise EgressRefused("fact memory is not available")
    meta = item.meta
    fact = Fact(item.text, str(meta.get("category", "general")), meta.get("key"), PUBLIC, "agent",
                float(meta.get("importance", 0.6)))  # fmt: skip
    saved = await deps.facts.save(fact)
    return f"saved public fact #{saved.id}"


def _asker(ctx: ToolContext) -> str:
    return speaker_subject(ctx.deps.principals, ctx.sender.id if ctx.sender else None)


async def memory_remove(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    if ctx.deps.facts is None:
        return ToolResult.error("Fact memory is not available.")
    fact_id = int(args["id"])
    # Only what this turn could have written: a group cannot delete public or anyone else's facts.
    writable = None if ctx.clearance.is_owner else [ctx.clearance.label]
    if not await ctx.deps.facts.remove(fact_id, writable):
        return ToolResult.error(f"No fact #{fact_id} that can be removed from this chat.")
    return f"Removed fact #{fact_id}."


async def memory_recall(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    if ctx.deps.facts is None:
        return ToolResult.error("Fact memory is not available.")
    query = args["query"]
    keep = await _subjects(ctx, args.get("subject"))
    recall = await ctx.deps.facts.retrieve(
        query,
        ctx.clearance.readable(),
        limit=int(args.get("limit", 5)),
        category=args.get("category"),
        query_vector=await query_vector(ctx, query),
        keep=keep,
        history=bool(args.get("history")),
    )
    found = [f for f in recall.facts + recall.history if ctx.clearance.may_read(f.scope)]
    if not found:
        return "No matching facts."
    ctx.shown(*{f.scope for f in found})
    return "\n".join(shown_to(ctx.clearance.label, f.scope, f"#{f.id} {f.line()}") for f in found)


async def _subjects(ctx: ToolContext, requested: str | None) -> Callable[[str], bool]:
    """Which subjects a recall returns: the one asked for (a name of a member is that member); else, in a
    group, not other members' facts."""
    asker = _asker(ctx)
    if requested:
        owner_id = ctx.deps.principals.owner_id
        members = await ctx.deps.db.read(lambda conn: chat_members(conn, ctx.chat.id, owner_id))
        wanted = resolve(requested, asker, ctx.chat.id, members)
        return lambda subject: subject == wanted
    return shown_subjects(ctx.chat.type == "dm", asker)


# -- memory_search -----------------------------------------------------------------------------------
async def memory_search(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    query = args["query"]
    limit = int(args.get("limit", 5))
    clearance, principals = ctx.clearance, ctx.deps.principals
    chat_id = args.get("chat_id")
    if chat_id is not None and not clearance.may_read(principals.chat_label(int(chat_id))):
        return ToolResult.error("Messages of other chats cannot be searched from this chat.")
    q = Question(query, await query_vector(ctx, query), clearance)
    params = replace(ctx.deps.search, limit=limit)
    found: list[tuple[str, str]] = []
    if chat_id is None:
        for hit in await recall.knowledge(ctx.deps.db, q, params):
            path = str(hit.meta["path"] or "")
            if is_document(path):  # a document someone sent: its words are not the owner's
                ctx.saw(outside("document", path))
            found.append((hit.meta["label"], f"[knowledge {path}] {hit.text}"))
    chats = None if chat_id is None else [int(chat_id)]
    for hit in await archive_messages(ctx, q, params, chats):
        when = datetime.fromtimestamp(hit.meta["date"]).astimezone()
        who = "me" if hit.meta["is_outgoing"] else (hit.meta["sender_name"] or hit.meta["sender_id"])
        label = principals.chat_label(int(hit.meta["chat_id"]))
        said = f"[chat {hit.meta['chat_id']} {when:%Y-%m-%d %H:%M} {who}] {hit.text}"
        found.append((label, forwarded(said, hit.meta.get("fwd_from"))))
    if ctx.deps.facts is not None and chat_id is None:
        for fact in await ctx.deps.facts.recall(query, clearance.readable(), limit=limit, query_vector=q.vector):
            found.append((fact.scope, f"[fact #{fact.id}] {fact.line()}"))
    found = [(label, line) for label, line in found if clearance.may_read(label)]
    ctx.shown(*{label for label, _ in found})
    return "\n".join(shown_to(ctx.clearance.label, label, line) for label, line in found) if found else "Nothing found."


def _list_memory_files(workspace: Any) -> str:
    files = knowledge_files(workspace)
    lines = [f"{f.relative_to(workspace)} ({f.stat().st_size} bytes)" for f in files]
    return "\n".join(lines) or "(no memory files yet)"


def _slug(text: str) -> str:
    return re.sub(r"\s+", "_", text.strip().lower())[:SLUG_MAX] or "general"


def memory_tools() -> list[Tool]:
    return [
        Tool(
            name="memory_read",
            description=(
                "Read your long-term memory file MEMORY.md, a day's log (memory/YYYY-MM-DD.md), the logs of "
                "yesterday and today, or the list of memory files."
            ),
            input_schema=schema(
                {
                    "target": {
                        "type": "string",
                        "enum": ["memory", "daily", "recent", "list"],
                        "description": "memory = MEMORY.md; daily = one day's log; recent = yesterday and "
                        "today; list = the memory files there are",
                    },
                    "date": {"type": "string", "description": "YYYY-MM-DD for target=daily (default today)"},
                    "lines": {"type": "integer", "minimum": 1, "maximum": 1000},
                },
                ("target",),
            ),
            handler=memory_read,
            scope="dm-only",
            category="memory",
        ),
        Tool(
            name="memory_write",
            description="Append a note to MEMORY.md (durable, curated knowledge) or to today's log.",
            input_schema=schema(
                {
                    "target": {"type": "string", "enum": ["memory", "daily"]},
                    "content": {"type": "string", "minLength": 1, "maxLength": 20_000},
                },
                ("target", "content"),
            ),
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
            input_schema=schema(
                {
                    "value": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "category": SLUG,
                    "key": SLUG,
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                    "about": {
                        "type": "string",
                        "maxLength": 80,
                        "description": "whom it is about: 'speaker' (default: who is talking to you), 'owner', "
                        "'group', or another person's or thing's name",
                    },
                    "replaces": {
                        "type": "integer",
                        "description": "the id of a fact this one corrects or updates (it is kept as history)",
                    },
                    "visibility": {
                        "type": "string",
                        "enum": ["private", "public"],
                        "description": "private (default): kept for this chat (the owner's chat: the owner's "
                        "memory); public: shown in every chat (only the owner can choose it)",
                    },
                },
                ("value",),
            ),
            handler=memory_save,
            release=release_fact,
            category="memory",
        ),
        Tool(
            name="memory_recall",
            description="Recall saved facts relevant to a query (e.g. after a reset: 'user's cat name').",
            input_schema=schema(
                {
                    "query": QUERY,
                    "category": SLUG,
                    "limit": LIMIT,
                    "subject": {
                        "type": "string",
                        "maxLength": 80,
                        "description": "only facts about this one: 'owner', a Telegram user id, or a name",
                    },
                    "history": {
                        "type": "boolean",
                        "description": "also facts that were replaced (for 'what did I use to…' questions)",
                    },
                },
                ("query",),
            ),
            handler=memory_recall,
            category="memory",
        ),
        Tool(
            name="memory_search",
            description=(
                "Search everything you remember: knowledge files, saved facts and archived Telegram "
                "messages. Give chat_id to search one chat's messages."
            ),
            input_schema=schema(
                {
                    "query": QUERY,
                    "chat_id": {"type": "integer"},
                    "limit": LIMIT,
                },
                ("query",),
            ),
            handler=memory_search,
            category="memory",
        ),
        Tool(
            name="memory_remove",
            description="Delete a saved fact by its id (ids are shown by memory_recall), e.g. when it is wrong.",
            input_schema=schema({"id": {"type": "integer", "minimum": 1}}, ("id",)),
            handler=memory_remove,
            category="memory",
        ),
    ]
