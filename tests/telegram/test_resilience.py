"""Dropped connections and a Telegram that cannot be reached: reconnect with backoff, never crash."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from telethon import TelegramClient
from telethon.sessions import MemorySession

from teleton.gateway.contract import GatewayError
from teleton.storage import Database
from teleton.telegram.gateway import GatewaySettings, TelegramGateway, make_client
from teleton.telegram.reconnect import Backoff, keep_connected


def test_backoff_doubles_up_to_the_cap() -> None:
    b = Backoff(base_s=1, max_s=10, jitter=0)
    assert [b.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    jittered = Backoff(base_s=4, max_s=100, jitter=0.25)
    assert all(3 <= jittered.delay(1) <= 5 for _ in range(50))


async def test_drops_are_reconnected_with_growing_delays_and_a_good_connection_resets_them() -> None:
    stop = asyncio.Event()
    delays: list[float] = []
    script = ["fail", "fail", "ok-then-drop", "fail", "ok-stay"]
    attempts = 0

    async def connect() -> None:
        nonlocal attempts
        attempts += 1
        step = script[min(attempts, len(script)) - 1]
        if step == "fail":
            raise ConnectionError("network is down")

    async def disconnected() -> None:
        if script[attempts - 1] == "ok-then-drop":
            return  # the connection dropped right away
        await asyncio.sleep(0.05)
        stop.set()

    await asyncio.wait_for(
        keep_connected(
            connect,
            disconnected,
            stop,
            backoff=Backoff(base_s=0.01, max_s=0.04, jitter=0),
            on_retry=lambda n, d, e: delays.append(d),
        ),
        timeout=5,
    )
    assert attempts == 5
    assert delays == [0.01, 0.02, 0.01, 0.02]  # after the good connection the backoff starts over


async def test_fatal_errors_are_not_retried() -> None:
    async def connect() -> None:
        raise GatewayError("not logged in")

    async def never() -> None:
        await asyncio.sleep(3600)

    with pytest.raises(GatewayError):
        await keep_connected(connect, never, asyncio.Event(), backoff=Backoff(base_s=0.01))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_telegram_does_not_block_or_crash_the_daemon(db: Database) -> None:
    """A real client against a refused port: start() returns, retries run in the background, stop() ends them."""
    client = TelegramClient(MemorySession(), 1, "0" * 32, connection_retries=0, timeout=1)
    client.session.set_dc(2, "127.0.0.1", _closed_port())
    gateway = TelegramGateway(client, db, GatewaySettings(reconnect_max_delay_s=1))
    await asyncio.wait_for(gateway.start(), timeout=10)
    assert gateway.me is None
    await asyncio.sleep(0.3)
    assert gateway._runner is not None and not gateway._runner.done()  # still trying, nothing raised
    await asyncio.wait_for(gateway.stop(), timeout=5)
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
