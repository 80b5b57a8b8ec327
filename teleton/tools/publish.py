"""Writes that land where others read: the egress rule applied to files and facts (DESIGN §8).

Only the owner can write under another label than their own (``workspace_paths.check_writable``); when
they do — a file into ``public/`` or a group's folder, a file moved there, a public fact — the readers of
that label would see whatever the turn was shown. So the write asks the outbox like a send: it goes ahead
when those readers may read everything the turn saw, and is otherwise held for the owner's approval,
refused, or let through, per ``privacy.cross_chat_sends``. ``performer`` carries out an approved one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from teleton.memory.facts import Fact
from teleton.privacy import decide
from teleton.storage.private_files import private_dir, write_private
from teleton.tools.outbox import EgressRefused, Outgoing
from teleton.tools.registry import ToolContext, ToolDeps
from teleton.tools.workspace_paths import resolve


async def guard(ctx: ToolContext, out: Outgoing) -> str | None:
    """None: write now. Else the write is held (the text says so); ``EgressRefused`` when it may not."""
    if out.label == ctx.clearance.label:
        return None
    if ctx.deps.outbox is not None:
        return await ctx.deps.outbox.check(ctx.chat.id, ctx.exposure, out)
    if decide("deny", ctx.exposure, str(out.label)) != "send":  # nobody here could approve it
        raise EgressRefused(f"Not written: the readers of {out.label} may not see what this conversation has seen.")
    return None


def performer(deps: ToolDeps) -> Callable[[Outgoing], Awaitable[str]]:
    """What the outbox calls for a write the owner approved: exactly the write that was shown."""

    async def perform(out: Outgoing) -> str:
        p: dict[str, Any] = out.payload
        if out.kind == "fact":
            if deps.facts is None:
                raise EgressRefused("fact memory is not available")
            fact = Fact(p["value"], p.get("category", "general"), p.get("key"), str(out.label), "agent",
                        float(p.get("importance", 0.6)))  # fmt: skip
            saved = await deps.facts.save(fact)
            return f"saved fact #{saved.id}"
        target = await asyncio.to_thread(resolve, deps.workspace, p["path"] if out.kind == "write" else p["new_path"])
        if deps.label_of_path(target.rel) != out.label:  # what the path means changed since it was shown
            raise EgressRefused(f"{target.name} is no longer read by {out.label}")
        if out.kind == "write":
            await asyncio.to_thread(
                write_private, target.real, p["content"], append=bool(p.get("append")), stop_at=deps.workspace
            )
            done = f"wrote {target.name}"
        else:
            source = await asyncio.to_thread(resolve, deps.workspace, p["path"])
            await asyncio.to_thread(private_dir, target.real.parent, stop_at=deps.workspace)
            await asyncio.to_thread(source.real.rename, target.real)
            done = f"moved {source.name} to {target.name}"
        if deps.knowledge is not None and hasattr(deps.knowledge, "reindex"):
            await deps.knowledge.reindex()
        return done

    return perform
