"""Sends to other chats and writes where others read, and the owner's approval of those that must wait
(DESIGN §8, "Egress").

Every tool that can put something into a chat other than the turn's own (``send_message`` with a chat id,
``forward_message``) hands an ``Outgoing`` to ``Outbox.send``; every write that lands under another label
than the turn's own (a file into ``public/`` or a group's folder, a file moved there, a public fact) asks
``Outbox.check`` first. Both ask ``teleton.privacy.decide`` with the turn's exposure: what the target may
read goes ahead at once; anything else is held (``approve``, the default), refused (``deny``) or let
through (``allow``, logged). A held send is a row of ``pending_sends``
with exactly what would be sent; the owner gets the preview in their DM and answers ``/approve N`` or
``/deny N`` (inline buttons with a bot account). Nothing is sent without that approval record, a held send
expires after ``privacy.approval_expiry_minutes``, and an approved one is sent once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from teleton.gateway.contract import Gateway, SentMessage
from teleton.privacy import Exposure, Principals, decide
from teleton.privacy.egress import Mode
from teleton.privacy.quoting import label_origin, quote
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)

PREVIEW_CAP = 3000  # characters of a held message shown in the notice (the rest is stated as cut)


class EgressRefused(Exception):
    """The send may not happen; the message says why (the model is told)."""


CHAT_KINDS = ("message", "forward")


@dataclass(frozen=True)
class Outgoing:
    kind: str  # sends: 'message' | 'forward'; writes: 'write' | 'rename' | 'fact'
    to_chat_id: int | None  # a send's target chat; None for a write
    payload: dict[str, Any]  # message {text}; forward {from_chat_id, message_id, text}; write {path, content,
    # append}; rename {path, new_path}; fact {value, category, key, importance}
    label: str | None = None  # a write's label (who will read it)


@dataclass(frozen=True)
class OutboxSettings:
    mode: Mode = "approve"
    expiry_s: float = 3600.0

    @classmethod
    def from_config(cls, privacy: Any) -> OutboxSettings:
        """From ``config.privacy``."""
        return cls(mode=privacy.cross_chat_sends, expiry_s=privacy.approval_expiry_minutes * 60.0)


def preview(out: Outgoing) -> str:
    p = out.payload
    if out.kind == "message":
        return str(p["text"])
    if out.kind == "forward":
        return f"(forward of message {p['message_id']} from chat {p['from_chat_id']}) " + str(p.get("text", ""))
    if out.kind == "write":
        return f"({'append to' if p.get('append') else 'write'} {p['path']}, read by {out.label}) {p['content']}"
    if out.kind == "rename":
        return f"(move {p['path']} to {p['new_path']}, read by {out.label})"
    return f"(save a fact read by {out.label}) [{p.get('category', 'general')}] {p['value']}"


def target_of(out: Outgoing) -> str:
    return f"chat {out.to_chat_id}" if out.to_chat_id is not None else f"readers of {out.label}"


class Outbox:
    def __init__(
        self,
        db: Database,
        gateway: Gateway | None,
        principals: Principals,
        settings: OutboxSettings = OutboxSettings(),
        *,
        clock: Callable[[], float] = time.time,
        perform: Callable[[Outgoing], Awaitable[str]] | None = None,
    ) -> None:
        self.db = db
        self.gateway = gateway
        self.principals = principals
        self.settings = settings
        self.clock = clock
        self.perform = perform  # carries out an approved write (see teleton.tools.publish)

    async def send(self, from_chat_id: int, exposure: Exposure, out: Outgoing) -> str:
        """Send ``out`` now, hold it for the owner, or refuse (``EgressRefused``); returns what happened."""
        held = await self.check(from_chat_id, exposure, out)
        if held is not None:
            return held
        sent = await self._deliver(out)
        return f"Sent to chat {out.to_chat_id} (message {sent.message_id})."

    async def check(self, from_chat_id: int, exposure: Exposure, out: Outgoing) -> str | None:
        """None: go ahead now. Else the send or write is held (the returned text says so), or refused
        (``EgressRefused``)."""
        own = out.to_chat_id is not None and out.to_chat_id == from_chat_id
        target = self.principals.clearance(out.to_chat_id) if out.to_chat_id is not None else str(out.label)
        verdict = decide(self.settings.mode, exposure, target, own_chat=own)
        unreadable = sorted(exposure.unreadable_by(target))
        if verdict == "send":
            if not own and unreadable:
                log.warning("egress_allowed", kind=out.kind, target=target_of(out), unreadable=unreadable)
            return None
        what = "sent" if out.kind in CHAT_KINDS else "written"
        if verdict == "deny":
            raise EgressRefused(
                f"Not {what}: the {target_of(out)} may not see what this conversation has seen "
                "(privacy.cross_chat_sends is deny)."
            )
        notice_chat = self.principals.notice_chat()
        if notice_chat is None:
            raise EgressRefused(f"Not {what}: it needs the owner's approval, and no owner is configured.")
        now = self.clock()
        held_id = await self.db.write(
            lambda conn: _hold(conn, from_chat_id, out, unreadable, now, now + self.settings.expiry_s)
        )
        log.info("egress_held", held=held_id, kind=out.kind, target=target_of(out), unreadable=unreadable)
        choices = [("Approve", f"/approve {held_id}"), ("Deny", f"/deny {held_id}")]
        try:
            await self._gateway().send_choice(notice_chat, self._notice(held_id, from_chat_id, out), choices)
        except Exception as exc:  # the held row stays; /held shows it
            log.warning("held_notice_failed", held=held_id, error=repr(exc))
        return (
            f"Held for the owner's approval (#{held_id}): the {target_of(out)} may not see what this "
            f"conversation has seen. It is {what} only if the owner approves."
        )

    async def approve(self, held_id: int, *, by: int | None) -> str:
        row = await self._decide(held_id, "approved", by)
        if isinstance(row, str):
            return row
        payload = json.loads(row["payload"])
        to_chat = int(row["to_chat_id"]) if row["kind"] in CHAT_KINDS else None
        out = Outgoing(row["kind"], to_chat, payload, payload.pop("label", None))
        try:
            if to_chat is not None:
                done = f"message {(await self._deliver(out)).message_id}"
            elif self.perform is not None:
                done = await self.perform(out)
            else:
                raise EgressRefused("nothing here can carry out an approved write")
        except Exception as exc:
            await self._finish(held_id, "failed", repr(exc))
            return f"#{held_id} was approved but could not be carried out: {exc}"
        await self._finish(held_id, "sent", done)
        log.info("held_egress_approved", held=held_id, kind=out.kind, target=target_of(out), by=by)
        return f"Sent #{held_id} to chat {to_chat}." if to_chat is not None else f"Done #{held_id}: {done}"

    async def deny(self, held_id: int, *, by: int | None) -> str:
        row = await self._decide(held_id, "denied", by)
        if isinstance(row, str):
            return row
        log.info("held_send_denied", held=held_id, by=by)
        return f"Dropped #{held_id}; nothing was sent."

    async def describe_pending(self) -> str:
        now = self.clock()
        rows = await self.db.write(lambda conn: _pending(conn, now))
        if not rows:
            return "No sends are waiting for approval."
        lines = []
        for row in rows:
            left = max(0, int((row["expires_at"] - now) // 60))
            text = " ".join(str(row["preview"]).split())
            target = f"to chat {row['to_chat_id']}" if row["kind"] in CHAT_KINDS else f"({row['kind']})"
            lines.append(f"#{row['id']} {target} (expires in {left} min): {text[:200]}")
        return "\n".join(lines)

    async def _decide(self, held_id: int, status: str, by: int | None) -> Any:
        """Record the owner's decision on a pending send; the row, or a message saying why not."""
        now = self.clock()

        def _write(conn: Connection) -> Any:
            row = conn.execute("select * from pending_sends where id = ?", (held_id,)).fetchone()
            if row is None:
                return f"There is no held send #{held_id}."
            if row["status"] == "pending" and row["expires_at"] <= now:
                conn.execute("update pending_sends set status = 'expired' where id = ?", (held_id,))
                return f"#{held_id} expired; nothing was sent."
            if row["status"] != "pending":
                return f"#{held_id} is already {row['status']}."
            conn.execute(
                "update pending_sends set status = ?, decided_at = ?, decided_by = ? where id = ?",
                (status, now, by, held_id),
            )
            return row

        return await self.db.write(_write)

    async def _finish(self, held_id: int, status: str, result: str) -> None:
        await self.db.execute("update pending_sends set status = ?, result = ? where id = ?", (status, result, held_id))

    async def _deliver(self, out: Outgoing) -> SentMessage:
        gateway = self._gateway()
        if out.kind == "message":
            return await gateway.send_message(out.to_chat_id, str(out.payload["text"]))
        if out.kind == "forward":
            return await gateway.forward_message(
                int(out.payload["from_chat_id"]), int(out.payload["message_id"]), out.to_chat_id
            )
        raise EgressRefused(f"unknown kind of send {out.kind!r}")

    def _gateway(self) -> Gateway:
        if self.gateway is None:
            raise EgressRefused("Telegram is not connected.")
        return self.gateway

    def _notice(self, held_id: int, from_chat_id: int, out: Outgoing) -> str:
        text = preview(out)
        if len(text) > PREVIEW_CAP:
            text = text[:PREVIEW_CAP] + f" [… {len(text) - PREVIEW_CAP} more characters]"
        until = datetime.fromtimestamp(self.clock() + self.settings.expiry_s).astimezone()
        # Quoted with its origin: what a conversation wants sent may have been written by a group, and
        # this notice sits in the owner's chat, where it must never read as the owner's own words.
        origin = label_origin(self.principals.chat_label(from_chat_id), str(from_chat_id))
        return (
            f"Held #{held_id}: a conversation in chat {from_chat_id} wants this to reach the {target_of(out)}, "
            f"who may not see everything that conversation saw:\n\n{quote(text, origin)}\n\n"
            f"/approve {held_id} to carry it out exactly as shown, /deny {held_id} to drop it "
            f"(expires {until:%H:%M})."
        )


def _hold(conn: Connection, from_chat_id: int, out: Outgoing, unreadable: list[str], now: float, expires: float) -> int:
    payload = out.payload if out.label is None else {**out.payload, "label": out.label}
    cur = conn.execute(
        "insert into pending_sends(from_chat_id, to_chat_id, kind, payload, preview, exposure, created_at, "
        "expires_at) values (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            from_chat_id,
            out.to_chat_id if out.to_chat_id is not None else 0,
            out.kind,
            json.dumps(payload),
            preview(out),
            json.dumps(unreadable),
            now,
            expires,
        ),
    )
    return int(cur.lastrowid)


def _pending(conn: Connection, now: float) -> list[Any]:
    conn.execute("update pending_sends set status = 'expired' where status = 'pending' and expires_at <= ?", (now,))
    return conn.execute("select * from pending_sends where status = 'pending' order by id").fetchall()
