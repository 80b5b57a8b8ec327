"""Every way out of a turn, and the owner's approval of those that must wait (docs/privacy.md, "Egress").

A tool that would put something where the turn's own chat cannot see it hands an ``Outgoing`` to ``egress``
(a send: ``Outbox.send``); ``teleton.privacy.decide`` rules with the turn's taint: go, refuse, or hold. A held
item keeps exactly the bytes that would leave and their digest; ``/approve N CODE`` releases those bytes once
through the tool's own ``release``, nothing re-read ("What `/approve N CODE` releases").
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from teleton.config.schema import PrivacyConfig
from teleton.gateway.contract import Gateway
from teleton.llm.tool_loop import ToolResult
from teleton.memory.feed import reads
from teleton.privacy import Principals
from teleton.privacy.egress import CHAT_KINDS, OUTSIDE, SHELL, Decision, Mode, Way, decide
from teleton.privacy.payload import strip_invisible
from teleton.privacy.quoting import mark
from teleton.storage.database import Database
from teleton.storage.private_files import write_private_bytes
from teleton.storage.sqlite_driver import Connection
from teleton.tools.held import CODE_LENGTH, Held, Outgoing, digest, sha256
from teleton.tools.held_notice import Notice, notice, summary
from teleton.tools.registry import Release, Tool, ToolContext, ToolDeps

log = structlog.get_logger(__name__)

STRIPPED_KINDS = (*CHAT_KINDS, "fact")  # text others will read as it is: no hidden characters ride along


class EgressRefused(Exception):
    """It may not leave; the message says why (the model is told)."""


@dataclass(frozen=True)
class OutboxSettings:
    mode: Mode = "approve"
    expiry_s: float = 3600.0
    strip_invisible: bool = True
    held_dir: Path | None = None  # where a long notice's file is written for the gateway (private); None: temp

    @classmethod
    def from_config(cls, privacy: PrivacyConfig, data_dir: Path | None = None) -> OutboxSettings:
        """From ``config.privacy`` (and ``storage.data_dir``)."""
        return cls(
            mode=privacy.cross_chat_sends,
            expiry_s=privacy.approval_expiry_minutes * 60.0,
            strip_invisible=privacy.strip_invisible,
            held_dir=None if data_dir is None else Path(data_dir) / "held",
        )


async def egress(ctx: ToolContext, out: Outgoing) -> tuple[Outgoing, str | None]:
    """The one door out for a tool: (what may leave, None) to go ahead now, (…, why) when it is held for
    the owner; ``EgressRefused`` when it may not leave. Without an outbox nobody could approve: refused."""
    if ctx.deps.outbox is not None:
        result: tuple[Outgoing, str | None] = await ctx.deps.outbox.check(ctx, out)
        return result
    decision = decide("deny", ctx.taint, ctx.clearance.label, way(ctx, out))
    if decision.verdict != "allow":
        raise EgressRefused(f"Not {_done(out)}: {decision.why}.")
    return out, None


async def gate(ctx: ToolContext, out: Outgoing) -> tuple[Outgoing, str | ToolResult | None]:
    """``egress`` for a tool's handler: (what may leave, None) to go ahead; otherwise the answer for the
    model — that it is held for the owner, or an error saying why it may not leave."""
    try:
        return await egress(ctx, out)
    except EgressRefused as exc:
        return out, ToolResult.error(str(exc))


def way(ctx: ToolContext, out: Outgoing) -> Way:
    if out.kind in CHAT_KINDS:
        own = out.to_chat_id == ctx.chat.id
        return Way(out.kind, ctx.deps.principals.clearance(int(out.to_chat_id or 0)), own=own)
    if out.kind in ("fetch", "outside_tool"):
        return Way(out.kind, OUTSIDE, typed=out.typed)
    if out.kind == "exec":
        return Way(out.kind, SHELL, typed=out.typed)
    return Way(out.kind, str(out.label))


class Outbox:
    def __init__(
        self,
        db: Database,
        gateway: Gateway | None,
        principals: Principals,
        settings: OutboxSettings = OutboxSettings(),
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.gateway = gateway
        self.principals = principals
        self.settings = settings
        self.clock = clock
        self.releases: dict[str, Release] = {}  # tool name -> what carries out its items (``Tool.release``)
        self.deps: ToolDeps | None = None

    def attach(self, tools: Iterable[Tool], deps: ToolDeps) -> None:
        """The tools whose items this outbox carries out, and the services they use to do it."""
        self.releases.update({tool.name: tool.release for tool in tools if tool.release is not None})
        self.deps = deps

    async def _release(self, item: Held) -> str:
        release = self.releases.get(item.tool)
        if release is None or self.deps is None:
            raise EgressRefused("nothing here can carry it out")
        return await release(item, self.deps)

    async def send(self, ctx: ToolContext, out: Outgoing) -> str:
        """A message or forward to another chat: sent now, held for the owner, or ``EgressRefused``."""
        out, held = await self.check(ctx, out)
        if held is not None:
            return held
        return await self._release(Held(**_fields(out), from_chat_id=ctx.chat.id))

    def decision(self, ctx: ToolContext, out: Outgoing) -> Decision:
        """What ``check`` would decide, without holding anything."""
        return decide(self.settings.mode, ctx.taint, ctx.clearance.label, way(ctx, out))

    async def check(self, ctx: ToolContext, out: Outgoing) -> tuple[Outgoing, str | None]:
        own = out.kind in CHAT_KINDS and out.to_chat_id == ctx.chat.id
        if self.settings.strip_invisible and out.kind in STRIPPED_KINDS and not own:
            clean, removed = strip_invisible(out.text)
            if removed:
                out = replace(out, body=clean.encode(), meta={**out.meta, "stripped": removed})
        decision = self.decision(ctx, out)
        if decision.verdict == "allow":
            if decision.unreadable or (decision.steering and out.kind not in CHAT_KINDS):
                log.warning("egress_allowed", kind=out.kind, to=out.destination, why=decision.why)
            return (out if own else self._attributed(ctx, out)), None
        if decision.verdict == "deny":
            raise EgressRefused(f"Not {_done(out)}: {decision.why} (privacy.cross_chat_sends is deny).")
        notice_chat = self.principals.notice_chat()
        if notice_chat is None:
            raise EgressRefused(f"Not {_done(out)}: it needs the owner's approval, and no owner is configured.")
        item = await self._hold(ctx.chat.id, out, decision)
        log.info("egress_held", held=item.id, kind=out.kind, to=out.destination, why=decision.why)
        shown = await self._notice(item)
        await self.db.execute("update pending_sends set preview = ? where id = ?", (shown.text, item.id))
        await self._announce(item, shown)
        return out, (
            f"Held for the owner's approval (#{item.id}): {decision.why}. It is {_done(out)} only if the owner "
            "approves exactly this."
        )

    def _attributed(self, ctx: ToolContext, out: Outgoing) -> Outgoing:
        """A message a conversation elsewhere wrote, into a chat that reads more than its words may be trusted
        with (a group's turn, an admin's, writing into the owner's DM): it carries where it came from, as
        delivered and as archived there, so that chat's later turns are steered by nothing unnoticed."""
        if out.kind != "message":
            return out
        words_of = ctx.taint.steering(self.principals.chat_label(int(out.to_chat_id or 0)))
        return replace(out, body=mark(out.text, words_of).encode()) if words_of else out

    async def approve(self, held_id: int, code: str | None, *, by: int | None) -> str:
        row = await self._decide(held_id, "approved", by, code)
        if isinstance(row, str):
            return row
        item = Held.from_row(row)
        try:
            if sha256(item.body) != row["body_sha256"] or digest(item) != item.digest:
                raise EgressRefused("the held copy does not match what you were shown")
            done = await self._release(item)
        except Exception as exc:
            await self._finish(held_id, "failed", repr(exc))
            log.warning("held_egress_failed", held=held_id, kind=item.kind, error=repr(exc))
            return f"#{held_id} was approved but not carried out: {exc}"
        await self._finish(held_id, "sent", done)
        log.info("held_egress_approved", held=held_id, kind=item.kind, to=item.destination, by=by)
        return f"Done #{held_id}: {done.rstrip('.')}."

    async def deny(self, held_id: int, *, by: int | None) -> str:
        row = await self._decide(held_id, "denied", by, None)
        if isinstance(row, str):
            return row
        log.info("held_egress_denied", held=held_id, by=by)
        return f"Dropped #{held_id}; nothing left."

    async def describe_pending(self) -> str:
        now = self.clock()
        rows = await self.db.write(lambda conn: _pending(conn, now))
        await self._tidy()
        if not rows:
            return "Nothing is waiting for your approval."
        items = [Held.from_row(row) for row in rows]
        return "\n".join([summary(item, self.principals, now, await self._title(item)) for item in items])

    async def waiting(self) -> list[tuple[Held, Notice]]:
        """What waits for the owner, each with its notice as the owner's DM shows it (for the dashboard)."""
        rows = await self.db.fetchall(
            "select * from pending_sends where status = 'pending' and expires_at > ? order by id", (self.clock(),)
        )
        items = [Held.from_row(row) for row in rows]
        return [(item, await self._notice(item)) for item in items]

    async def show(self, held_id: int) -> str:
        """/held N: the notice of #N again, whole (with its file)."""
        row = await self.db.fetchone("select * from pending_sends where id = ?", (held_id,))
        if row is None:
            return f"There is no held item #{held_id}."
        item = Held.from_row(row)
        if item.status != "pending":
            return f"#{held_id} is {item.status}; nothing waits."
        await self._announce(item, await self._notice(item))
        return f"#{held_id} is shown above, whole."

    # -- the store ----------------------------------------------------------------------------------
    async def _hold(self, from_chat: int, out: Outgoing, decision: Decision) -> Held:
        now = self.clock()
        item = Held(
            **_fields(out),
            from_chat_id=from_chat,
            digest=digest(out),
            unreadable=tuple(sorted(decision.unreadable)),
            steering=tuple(sorted(decision.steering)),
            created_at=now,
            expires_at=now + self.settings.expiry_s,
        )
        held_id = await self.db.write(lambda conn: _insert(conn, item))
        return replace(item, id=held_id)

    async def _decide(self, held_id: int, status: str, by: int | None, code: str | None) -> Any:
        """Record the owner's decision on a pending item; the row, or a message saying why not."""
        now = self.clock()

        def _write(conn: Connection) -> Any:
            row = conn.execute("select * from pending_sends where id = ?", (held_id,)).fetchone()
            if row is None:
                return f"There is no held item #{held_id}."
            if row["status"] == "pending" and row["expires_at"] <= now:
                conn.execute("update pending_sends set status = 'expired' where id = ?", (held_id,))
                return f"#{held_id} expired; nothing left."
            if row["status"] != "pending":
                return f"#{held_id} is already {row['status']}."
            if status == "approved" and code is None:
                return (
                    f"To release #{held_id}, send /approve {held_id} CODE with the code from its notice: it ties "
                    f"your approval to exactly what you were shown. /held {held_id} shows it again."
                )
            if status == "approved" and (code or "").lower() != row["digest"][:CODE_LENGTH]:
                return f"That is not the code of #{held_id}: nothing left. /held {held_id} shows it again."
            conn.execute(
                "update pending_sends set status = ?, decided_at = ?, decided_by = ? where id = ?",
                (status, now, by, held_id),
            )
            return row

        decided = await self.db.write(_write)
        await self._tidy()
        return decided

    async def _finish(self, held_id: int, status: str, result: str) -> None:
        await self.db.execute("update pending_sends set status = ?, result = ? where id = ?", (status, result, held_id))

    async def _tidy(self) -> None:
        """The files of items nobody waits on any more go: what was shown leaves no copy behind."""
        rows = await self.db.fetchall("select id from pending_sends where status = 'pending'")
        pending = {f"held-{int(row[0])}" for row in rows}

        def drop() -> None:
            for path in self._folder().glob("held-*"):
                if path.name.split(".", 1)[0] not in pending:
                    path.unlink(missing_ok=True)

        await asyncio.to_thread(drop)

    # -- telling the owner --------------------------------------------------------------------------
    async def _notice(self, item: Held) -> Notice:
        until = datetime.fromtimestamp(item.expires_at).astimezone()
        return notice(item, self.principals, until=until, title=await self._title(item))

    async def _announce(self, item: Held, shown: Notice) -> None:
        chat = self.principals.notice_chat()
        if chat is None or self.gateway is None:
            return
        try:
            await self.gateway.send_choice(chat, shown.text, self._choices(item))
            if shown.attachment is not None:
                path = self._folder() / shown.filename
                await asyncio.to_thread(write_private_bytes, path, shown.attachment)
                await self.gateway.send_file(chat, path, caption=f"Held #{item.id}: the whole of it.")
        except Exception as exc:  # the held row stays; /held shows it
            log.warning("held_notice_failed", held=item.id, error=repr(exc))

    def _choices(self, item: Held) -> list[tuple[str, str]]:
        return [("Approve", f"/approve {item.id} {item.code}"), ("Deny", f"/deny {item.id}")]

    def _folder(self) -> Path:
        return self.settings.held_dir or Path(tempfile.gettempdir()) / f"teleton-held-{id(self)}"

    async def _title(self, item: Held) -> str:
        if item.to_chat_id is None:
            return ""
        to_chat = item.to_chat_id
        return (await self.db.read(lambda conn: reads.chat_titles(conn, [to_chat]))).get(to_chat, "")


def _done(out: Outgoing) -> str:
    return {"fetch": "fetched", "exec": "run", "move": "moved", "fact": "saved"}.get(
        out.kind, "sent" if out.kind in CHAT_KINDS else "written"
    )


def _fields(out: Outgoing) -> dict[str, Any]:
    return {name: getattr(out, name) for name in Outgoing.__dataclass_fields__}


def _insert(conn: Connection, item: Held) -> int:
    cur = conn.execute(
        "insert into pending_sends(from_chat_id, to_chat_id, kind, tool, label, payload, body, body_sha256, "
        "source_sha256, digest, preview, exposure, steering, created_at, expires_at) "
        "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?)",
        (
            item.from_chat_id, item.to_chat_id, item.kind, item.tool, item.label, json.dumps(item.meta),
            item.body, sha256(item.body), item.source_sha256, item.digest, json.dumps(list(item.unreadable)),
            json.dumps(list(item.steering)), item.created_at, item.expires_at,
        ),
    )  # fmt: skip
    return int(cur.lastrowid)


def _pending(conn: Connection, now: float) -> list[Any]:
    conn.execute("update pending_sends set status = 'expired' where status = 'pending' and expires_at <= ?", (now,))
    return conn.execute("select * from pending_sends where status = 'pending' order by id").fetchall()
