"""A held send expires (``privacy.approval_expiry_minutes``): after that, /approve sends nothing and says so,
and /held no longer lists it. Before it, an approval sends it exactly once."""

from __future__ import annotations

import io

from rich.console import Console

from teleton.gateway.terminal import TerminalGateway
from teleton.privacy import Exposure, Principals
from teleton.storage import Database
from teleton.tools.outbox import Outbox, OutboxSettings, Outgoing

OWNER, GROUP = 1001, -4242


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _outbox(db: Database, clock: Clock) -> tuple[Outbox, TerminalGateway]:
    gateway = TerminalGateway(Console(file=io.StringIO()), db=db)
    principals = Principals(owner_id=OWNER)
    return Outbox(db, gateway, principals, OutboxSettings(mode="approve", expiry_s=600.0), clock=clock), gateway


def _to_group(gateway: TerminalGateway) -> list[str]:
    return [m.text for m in gateway.sent if m.chat_id == GROUP]


async def test_an_expired_held_send_is_never_sent(db: Database) -> None:
    clock = Clock()
    outbox, gateway = _outbox(db, clock)
    secret = Exposure(["owner"])  # the owner's turn saw the owner's memory
    held = await outbox.send(OWNER, secret, Outgoing("message", GROUP, {"text": "the locker code is 4711"}))
    assert "Held for the owner's approval (#1)" in held
    assert "#1 to chat -4242 (expires in 10 min)" in await outbox.describe_pending()

    clock.now += 601
    assert await outbox.approve(1, by=OWNER) == "#1 expired; nothing was sent."
    assert await outbox.approve(1, by=OWNER) == "#1 is already expired."
    assert await outbox.describe_pending() == "No sends are waiting for approval."
    assert _to_group(gateway) == []
    rows = await db.fetchall("select status, decided_by from pending_sends")
    assert [tuple(r) for r in rows] == [("expired", None)]


async def test_a_held_send_approved_in_time_is_sent_once(db: Database) -> None:
    clock = Clock()
    outbox, gateway = _outbox(db, clock)
    await outbox.send(OWNER, Exposure(["owner"]), Outgoing("message", GROUP, {"text": "see you at 8"}))
    clock.now += 599
    assert await outbox.approve(1, by=OWNER) == f"Sent #1 to chat {GROUP}."
    assert await outbox.approve(1, by=OWNER) == "#1 is already sent."
    assert _to_group(gateway) == ["see you at 8"]
