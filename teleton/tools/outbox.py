"""Sends to other chats, and the owner's approval of those that must wait (DESIGN §8, "Egress").

Every tool that can put something into a chat other than the turn's own (``send_message`` with a chat id,
``forward_message``) hands an ``Outgoing`` to ``Outbox.send``. It asks ``teleton.privacy.decide`` with the
turn's exposure: a send the target may read goes out at once; any other is held (``approve``, the
default), refused (``deny``) or sent anyway (``allow``, logged). A held send is a row of ``pending_sends``
with exactly what would be sent; the owner gets the preview in their DM and answers ``/approve N`` or
``/deny N`` (inline buttons with a bot account). Nothing is sent without that approval record, a held send
expires after ``privacy.approval_expiry_minutes``, and an approved one is sent once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from teleton.gateway.contract import Gateway, SentMessage
from teleton.privacy import Exposure, Principals, decide
from teleton.privacy.egress import Mode
from teleton.storage.database import Database
from teleton.storage.sqlite_driver import Connection

log = structlog.get_logger(__name__)

PREVIEW_CAP = 3000  # characters of a held message shown in the notice (the rest is stated as cut)


class EgressRefused(Exception):
    """The send may not happen; the message says why (the model is told)."""


@dataclass(frozen=True)
class Outgoing:
    kind: str  # 'message' | 'forward'
    to_chat_id: int
    payload: dict[str, Any]  # message: {text}; forward: {from_chat_id, message_id, text}


@dataclass(frozen=True)
class OutboxSettings:
    mode: Mode = "approve"
    expiry_s: float = 3600.0

    @classmethod
    def from_config(cls, privacy: Any) -> OutboxSettings:
        """From ``config.privacy``."""
        return cls(mode=privacy.cross_chat_sends, expiry_s=privacy.approval_expiry_minutes * 60.0)


def preview(out: Outgoing) -> str:
    if out.kind == "message":
        return str(out.payload["text"])
    return f"(forward of message {out.payload['message_id']} from chat {out.payload['from_chat_id']}) " + str(
        out.payload.get("text", "")
    )


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

    async def send(self, from_chat_id: int, exposure: Exposure, out: Outgoing) -> str:
        """Send ``out`` now, hold it for the owner, or refuse (``EgressRefused``); returns what happened."""
        target = self.principals.clearance(out.to_chat_id)
        own = out.to_chat_id == from_chat_id
        verdict = decide(self.settings.mode, exposure, target, own_chat=own)
        unreadable = sorted(exposure.unreadable_by(target))
        if verdict == "send":
            if not own and unreadable:
                log.warning("cross_chat_send_allowed", to_chat_id=out.to_chat_id, unreadable=unreadable)
            sent = await self._deliver(out)
            return f"Sent to chat {out.to_chat_id} (message {sent.message_id})."
        if verdict == "deny":
            raise EgressRefused(
                f"Not sent: chat {out.to_chat_id} may not see what this conversation has seen "
                "(privacy.cross_chat_sends is deny)."
            )
        notice_chat = self.principals.notice_chat()
        if notice_chat is None:
            raise EgressRefused("Not sent: sending there needs the owner's approval, and no owner is configured.")
        now = self.clock()
        held_id = await self.db.write(
            lambda conn: _hold(conn, from_chat_id, out, unreadable, now, now + self.settings.expiry_s)
        )
        log.info("send_held", held=held_id, to_chat_id=out.to_chat_id, unreadable=unreadable)
        choices = [("Approve", f"/approve {held_id}"), ("Deny", f"/deny {held_id}")]
        try:
            await self._gateway().send_choice(notice_chat, self._notice(held_id, from_chat_id, out), choices)
        except Exception as exc:  # the held row stays; /held shows it
            log.warning("held_notice_failed", held=held_id, error=repr(exc))
        return (
            f"Held for the owner's approval (#{held_id}): chat {out.to_chat_id} may not see what this "
            "conversation has seen. It is sent only if the owner approves."
        )

    async def approve(self, held_id: int, *, by: int | None) -> str:
        row = await self._decide(held_id, "approved", by)
        if isinstance(row, str):
            return row
        out = Outgoing(row["kind"], int(row["to_chat_id"]), json.loads(row["payload"]))
        try:
            sent = await self._deliver(out)
        except Exception as exc:
            await self._finish(held_id, "failed", repr(exc))
            return f"#{held_id} was approved but could not be sent: {exc}"
        await self._finish(held_id, "sent", f"message {sent.message_id}")
        log.info("held_send_approved", held=held_id, to_chat_id=out.to_chat_id, by=by)
        return f"Sent #{held_id} to chat {out.to_chat_id}."

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
            lines.append(f"#{row['id']} to chat {row['to_chat_id']} (expires in {left} min): {text[:200]}")
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
        shown = (
            text
            if len(text) <= PREVIEW_CAP
            else text[:PREVIEW_CAP] + f"\n[… {len(text) - PREVIEW_CAP} more characters]"
        )
        until = datetime.fromtimestamp(self.clock() + self.settings.expiry_s).astimezone()
        return (
            f"Held send #{held_id}: a conversation in chat {from_chat_id} wants me to send this to chat "
            f"{out.to_chat_id}, which may not see everything that conversation saw:\n\n{shown}\n\n"
            f"/approve {held_id} to send it exactly as shown, /deny {held_id} to drop it "
            f"(expires {until:%H:%M})."
        )


def _hold(conn: Connection, from_chat_id: int, out: Outgoing, unreadable: list[str], now: float, expires: float) -> int:
    cur = conn.execute(
        "insert into pending_sends(from_chat_id, to_chat_id, kind, payload, preview, exposure, created_at, "
        "expires_at) values (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            from_chat_id,
            out.to_chat_id,
            out.kind,
            json.dumps(out.payload),
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
