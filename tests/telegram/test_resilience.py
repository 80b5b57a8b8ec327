"""Dropped connections and a Telegram that cannot be reached: retried with backoff under the supervisor,
FloodWait slept as Telegram asks, errors a retry cannot fix stop the loop with a reason; never a crash."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from telethon import TelegramClient, errors
from telethon.sessions import MemorySession

from teleton.gateway.contract import GatewayError
from teleton.process.supervisor import Supervisor
from teleton.storage import Database
from teleton.telegram.faults import fatal_reason
from teleton.telegram.gateway import GatewaySettings, TelegramGateway, make_client
from tests.waiting import until


async def test_backoff_grows_and_starts_over_after_a_good_connection() -> None:
    fatal: list[str] = []
    sup = Supervisor(lambda name, why: fatal.append(why), first_backoff_s=0.01, max_backoff_s=0.04, jitter_s=0)
    script = iter(["fail", "fail", "fail", "fail", "up-then-drop", "fail", "up-stay"])
    waits: list[float | None] = []
    stay = asyncio.Event()

    async def connection(up: Any) -> None:
        step = next(script)
        if step == "fail":
            raise ConnectionError("network is down")
        up()
        if step == "up-stay":
            stay.set()
            await asyncio.sleep(3600)

    def record() -> bool:
        health = sup.loops["telegram"]
        if health.state == "down" and (not waits or waits[-1] != (health.restarts, health.retry_in_s)):
            waits.append((health.restarts, health.retry_in_s))  # type: ignore[arg-type]
        return stay.is_set()

    sup.run("telegram", connection, classify=fatal_reason)
    await until(record)
    assert sup.loops["telegram"].state == "up" and not fatal
    # 0.01, 0.02, 0.04, 0.04 (capped); after the good connection it starts over at 0.01.
    assert [w for _, w in waits] == [0.01, 0.02, 0.04, 0.04, 0.01]
    await sup.stop()


async def test_flood_wait_and_telethon_giving_up_are_retried_not_fatal() -> None:
    fatal: list[str] = []
    sup = Supervisor(lambda name, why: fatal.append(why), first_backoff_s=0.01, jitter_s=0)
    flood = errors.FloodWaitError(request=None, capture=1)  # FloodWait on get_me() after a reconnect
    failures = iter([flood, asyncio.IncompleteReadError(b"", 1347703872), OSError("reset")])
    seen: list[float | None] = []
    connected = asyncio.Event()

    async def connection(up: Any) -> None:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        up()
        connected.set()
        await asyncio.sleep(3600)

    sup.run("telegram", connection, classify=fatal_reason)
    await until(lambda: seen.append(sup.loops["telegram"].retry_in_s) or connected.is_set())
    assert not fatal and sup.loops["telegram"].restarts == 3
    assert 1.0 in seen  # the FloodWait's own delay, exactly
    await sup.stop()


@pytest.mark.parametrize(
    "error",
    [errors.SessionRevokedError(request=None), errors.AuthKeyUnregisteredError(request=None),
     errors.UserDeactivatedBanError(request=None), errors.AccessTokenInvalidError(request=None)],
    ids=lambda e: type(e).__name__,
)  # fmt: skip
async def test_a_revoked_session_or_banned_account_is_fatal_and_not_retried(error: Exception) -> None:
    fatal: list[tuple[str, str]] = []
    sup = Supervisor(lambda name, why: fatal.append((name, why)), first_backoff_s=0.01)
    calls = 0

    async def connection(up: Any) -> None:
        nonlocal calls
        calls += 1
        raise error

    task = sup.run("telegram", connection, classify=fatal_reason)
    await task
    assert calls == 1 and len(fatal) == 1 and fatal[0][0] == "telegram"
    assert "teleton setup" in fatal[0][1] and sup.loops["telegram"].state == "fatal"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_telegram_does_not_block_or_crash_the_daemon(db: Database) -> None:
    """A real client against a refused port: start() returns, retries run in the background, stop() ends them."""
    client = TelegramClient(MemorySession(), 1, "0" * 32, connection_retries=0, timeout=1)
    client.session.set_dc(2, "127.0.0.1", _closed_port())
    gateway = TelegramGateway(client, db, GatewaySettings(reconnect_max_delay_s=1))
    fatal: list[str] = []
    sup = Supervisor(lambda name, why: fatal.append(why), max_backoff_s=1)
    await asyncio.wait_for(gateway.start(supervisor=sup), timeout=60)  # hang guards only, here and below
    assert gateway.me is None
    await until(lambda: sup.loops["telegram"].restarts >= 2)  # retried in the background after start returned
    assert gateway._runner is not None and not gateway._runner.done()  # still trying, nothing raised
    assert sup.loops["telegram"].state == "down" and not fatal
    await asyncio.wait_for(gateway.stop(), timeout=60)
    assert gateway._runner.done()


def test_make_client_secures_the_session_and_explains_missing_credentials(tmp_path: Path) -> None:
    class Tg:
        api_id: Any = 1
        api_hash: Any = "0" * 32
        session_path: Any = tmp_path / "s" / "telegram.session"

    session = Tg.session_path
    session.parent.mkdir()
    session.write_bytes(b"")
    session.chmod(0o644)
    make_client(Tg())
    assert session.stat().st_mode & 0o777 == 0o600
    Tg.api_hash = None
    with pytest.raises(GatewayError, match=r"my\.telegram\.org"):
        make_client(Tg())
