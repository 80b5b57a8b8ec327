"""``memory_add_document``: the owner keeps a document someone sent as part of the knowledge base.

The message's file is downloaded (into its chat's folder, as any download), its text extracted, and written
as Markdown where the knowledge index looks: ``memory/doc-<name>.md`` — the owner's label, like the rest of
``memory/`` — or, when the owner says so, ``public/documents/<name>.md``, which every chat may read (docs/privacy.md:
public is only ever the owner's deliberate choice). The index is refreshed at once, so the next question
finds it.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from teleton.llm.tool_loop import ToolResult
from teleton.media.documents import extract_text
from teleton.media.errors import MediaError
from teleton.privacy import PUBLIC
from teleton.privacy.paths import DOCUMENT_PLACES
from teleton.storage.private_files import write_private
from teleton.tools.families.telegram_common import (
    CHAT_ID,
    MESSAGE_ID,
    Refused,
    download_to_chat,
    gateway,
    readable_chat,
    target_message,
    tool,
)
from teleton.tools.families.workspace_paths import resolve
from teleton.tools.held import Held, Outgoing
from teleton.tools.outbox import EgressRefused, egress
from teleton.tools.registry import Tool, ToolContext, ToolDeps, schema

DOCUMENT_CAP = 20 * 1024 * 1024
MAX_CHARS = 1_000_000  # of text kept in the knowledge base from one document


async def memory_add_document(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
    if not ctx.clearance.is_owner:
        raise Refused("Only the owner can add documents to the knowledge base.")
    chat_id = readable_chat(args, ctx)
    message_id = target_message(args, ctx)
    workspace = ctx.deps.workspace
    path = await download_to_chat(gateway(ctx), workspace, chat_id, message_id, DOCUMENT_CAP)
    data = await asyncio.to_thread(path.read_bytes)
    try:
        doc = await asyncio.to_thread(extract_text, data, filename=path.name, mime_type=None, max_chars=MAX_CHARS)
    except MediaError as exc:
        raise Refused(str(exc)) from None
    if not doc.text.strip():
        raise Refused(f"{_shown_name(path)} has no text to keep{f' ({doc.note})' if doc.note else ''}.")
    title = (args.get("title") or doc.title or _shown_name(path)).strip()
    place = DOCUMENT_PLACES[1] if args.get("public") else DOCUMENT_PLACES[0]  # "<folder>/<prefix>"
    folder, prefix = place.rsplit("/", 1)
    target = await asyncio.to_thread(_free_name, workspace / folder, prefix + _slug(title))
    source = f"_From {_shown_name(path)}, added {time.strftime('%Y-%m-%d')}_"
    cut = "\n\n_[the document was longer; the rest was not kept]_" if doc.truncated else ""
    text = f"# {title}\n\n{source}\n\n{doc.text.strip()}{cut}\n"
    rel = target.relative_to(workspace).as_posix()
    if args.get("public"):  # every chat will read what the document says: the egress rule, with all of it shown
        out = Outgoing("document", text.encode(), label=PUBLIC, meta={"path": rel}, tool="memory_add_document")
        _, held = await egress(ctx, out)
        if held is not None:
            return held
    await asyncio.to_thread(write_private, target, text, stop_at=workspace)
    if ctx.deps.knowledge is not None:
        await ctx.deps.knowledge.reindex()
    who = "every chat can read it" if args.get("public") else "only you can read it"
    return f"Added {title} to the knowledge base as {rel} ({who})."


async def release_document(item: Held, deps: ToolDeps) -> str:
    """A document the owner approved for everyone: exactly the text shown, as a new file."""
    target = await asyncio.to_thread(resolve, deps.workspace, str(item.meta["path"]))
    if deps.label_of_path(target.rel) != item.label:
        raise EgressRefused(f"{target.name} is no longer read by {item.label}")
    if await asyncio.to_thread(target.real.exists):
        raise EgressRefused(f"{target.name} exists now; nothing was published")
    await asyncio.to_thread(write_private, target.real, item.text, stop_at=deps.workspace)
    if deps.knowledge is not None:
        await deps.knowledge.reindex()
    return f"published {target.name}"


def _shown_name(path: Path) -> str:
    # Downloads are named "<message id>-<original name>" by some gateways; the original name is what people know.
    return re.sub(r"^\d+-", "", path.name)


def _slug(title: str) -> str:
    slug = re.sub(r"[^\w]+", "-", title.lower(), flags=re.UNICODE).strip("-")
    return slug[:60] or "document"


def _free_name(folder: Path, stem: str) -> Path:
    """``folder/stem.md``, or ``stem-2.md``… when taken: a second document never overwrites the first."""
    for n in range(1, 1000):
        candidate = folder / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
        if not candidate.exists():
            return candidate
    raise Refused(f"too many documents named {stem}")


def document_tools() -> list[Tool]:
    return [
        tool(
            "memory_add_document",
            "Owner only: keep the PDF, docx, csv or text file of a message in your knowledge base, so later "
            "questions find it (default: the message being answered). public=true makes it readable in every "
            "chat; otherwise only the owner's chats see it.",
            schema(
                {
                    "message_id": MESSAGE_ID,
                    "chat_id": CHAT_ID,
                    "title": {"type": "string", "minLength": 1, "maxLength": 120},
                    "public": {"type": "boolean"},
                }
            ),
            memory_add_document,
            scope="dm-only",
            release=release_document,
        )
    ]
