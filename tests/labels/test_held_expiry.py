"""A held item expires (``privacy.approval_expiry_minutes``): after that, /approve releases nothing and says
so, and /held no longer lists it. Before it, an approval with the item's code releases it exactly once."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from teleton.cli.terminal_gateway import TerminalGateway
from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.privacy import OWNER_CLEARANCE, Principals, Taint
from teleton.storage import Database
from teleton.tools.families.telegram_actions import telegram_tools
from teleton.tools.held import Outgoing
from teleton.tools.outbox import Outbox, OutboxSettings
from teleton.tools.registry import ToolContext, ToolDeps

OWNER, GROUP = 1001, -4242


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def owner_turn(db: Database, tmp_path: Path, clock: Clock) -> tuple[ToolContext, Outbox, TerminalGateway]:
    """The owner's DM turn (it saw the owner's memory), with an outbox whose notices go to the terminal."""
    gateway = TerminalGateway(Console(file=io.StringIO()), db=db)
    principals = Principals(owner_id=OWNER)
    settings = OutboxSettings(mode="approve", expiry_s=600.0, held_dir=tmp_path / "held")
    outbox = Outbox(db, gateway, principals, settings, clock=clock)
    deps = ToolDeps(db=db, workspace=tmp_path / "ws", gateway=gateway, principals=principals, outbox=outbox)
    outbox.attach(telegram_tools(), deps)
    chat = ChatInfo(id=OWNER, type="dm")
    ctx = ToolContext(chat, UserInfo(OWNER), True, OWNER_CLEARANCE, deps, taint=Taint(["owner"]))
    return ctx, outbox, gateway


def to_group(text: str) -> Outgoing:
    return Outgoing("message", text.encode(), to_chat_id=GROUP, tool="send_message")


def _to_group(gateway: TerminalGateway) -> list[str]:
    return [m.text for m in gateway.sent if m.chat_id == GROUP]


async def _code(db: Database, held_id: int) -> str:
    return str((await db.fetchone("select digest from pending_sends where id = ?", (held_id,)))["digest"])[:8]


async def test_an_expired_held_send_is_never_sent(db: Database, tmp_path: Path) -> None:
    clock = Clock()
    ctx, outbox, gateway = owner_turn(db, tmp_path, clock)
    held = await outbox.send(ctx, to_group("the locker code is 4711"))
    assert "Held for the owner's approval (#1)" in held
    assert "#1: send a message to group -4242" in await outbox.describe_pending()
    assert "expires in 10 min" in await outbox.describe_pending()

    clock.now += 601
    code = await _code(db, 1)
    assert await outbox.approve(1, code, by=OWNER) == "#1 expired; nothing left."
    assert await outbox.approve(1, code, by=OWNER) == "#1 is already expired."
    assert await outbox.describe_pending() == "Nothing is waiting for your approval."
    assert _to_group(gateway) == []
    rows = await db.fetchall("select status, decided_by from pending_sends")
    assert [tuple(r) for r in rows] == [("expired", None)]


async def test_a_held_send_approved_in_time_is_sent_once(db: Database, tmp_path: Path) -> None:
    clock = Clock()
    ctx, outbox, gateway = owner_turn(db, tmp_path, clock)
    await outbox.send(ctx, to_group("see you at 8"))
    clock.now += 599
    assert (await outbox.approve(1, await _code(db, 1), by=OWNER)).startswith(f"Done #1: Sent to chat {GROUP}")
    assert await outbox.approve(1, await _code(db, 1), by=OWNER) == "#1 is already sent."
    assert _to_group(gateway) == ["see you at 8"]
