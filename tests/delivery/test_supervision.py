"""Every background loop is supervised (docs/operations.md): weather (FloodWait, Telethon giving up on a read) is
retried until the loop is up again; a revoked session stops the daemon with one reason and exit 78; while a
loop stays down past the grace the watchdog is withheld.

The Telegram side is the real TelegramGateway on a Telethon client whose connection and answers are scripted
(``LinkClient``): the network is the only fake. The daemon is the real ``Daemon``, run in-process with only its
gateway factory pointed at that client (the daemon's Telegram transport needs a real MTProto server)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

from telethon import errors, functions

from teleton.config import load_config
from teleton.daemon.health import gather_status
from teleton.daemon.runner import EXIT_FATAL, WATCHDOG_GRACE_S, Daemon
from teleton.daemon.status_file import describe
from teleton.daemon.systemd_notify import Notifier
from teleton.process.supervisor import Supervisor
from teleton.storage import Database
from teleton.telegram.gateway import GatewaySettings, TelegramGateway
from tests.daemon.harness import write_config
from tests.delivery.support import BOUND_S, LinkClient
from tests.fakes.anthropic_server import FakeAnthropic
from tests.telegram.conftest import make_settings
from tests.waiting import until

# -- (a) the Telegram loop rides out FloodWait and a cut read -------------------------------------------------


async def test_the_telegram_loop_retries_flood_wait_and_a_cut_read_then_comes_up(db: Database) -> None:
    client = LinkClient()
    fatal: list[str] = []
    supervisor = Supervisor(lambda name, why: fatal.append(why), first_backoff_s=0.01, max_backoff_s=0.05, jitter_s=0)
    gateway = TelegramGateway(client, db, make_settings())
    await gateway.start(supervisor)
    health = supervisor.loops["telegram"]
    try:
        assert health.state == "up" and gateway.me is not None and client.connects == 1

        # The connection drops. On reconnect Telegram answers get_me() with a FloodWait, then the next
        # connect is cut mid-read (Telethon's IncompleteReadError), then all is well again.
        flood = [errors.FloodWaitError(request=None, capture=1)]

        def refuse(request: Any) -> BaseException | None:
            if isinstance(request, functions.users.GetUsersRequest) and flood:
                client.connect_failures.append(asyncio.IncompleteReadError(b"", 1347703872))  # the next connect
                return flood.pop()
            return None

        client.fail_when = refuse
        waits: list[float | None] = []
        errors_seen: list[str | None] = []

        def record() -> bool:
            if health.state == "down":
                waits.append(health.retry_in_s)
                errors_seen.append(health.last_error)
            return client.connects == 4 and health.state == "up"

        client.drop()
        await until(record)
    finally:
        await gateway.stop(grace_s=1)
        await supervisor.stop()
    assert not fatal
    assert 1.0 in waits  # the FloodWait's own delay, exactly as Telegram said
    assert "Telegram asked to wait 1 s (FloodWaitError)" in errors_seen, errors_seen
    # in words, not Telethon's "0 bytes read on a total of 1347703872 expected bytes"
    assert health.restarts >= 3 and health.last_error == "could not reach Telegram (IncompleteReadError)"
    # connect, the drop's reconnect (FloodWait on get_me), the cut read, the good one
    assert client.connects == 4
    assert sum(isinstance(r, functions.users.GetUsersRequest) for r in client.requests) == 3


# -- (b) a revoked session stops the daemon: exit 78, one reason -------------------------------------------------


class DaemonOnLink(Daemon):
    """The real daemon; only its gateway factory is pointed at a scripted Telegram client."""

    link: LinkClient

    def _make_gateway(self, db: Database) -> Any:
        return TelegramGateway(self.link, db, GatewaySettings.from_telegram(self.config.telegram, self.principals))


def _daemon(tmp_path: Path, api: FakeAnthropic, link: LinkClient) -> DaemonOnLink:
    config = write_config(
        tmp_path, api.base_url,
        **{"embedding.provider": "none", "tool_rag.enabled": False, "telegram.reconnect_max_delay_s": 1,
           "logging.level": "warning"},
    )  # fmt: skip
    daemon = DaemonOnLink(load_config(config))
    daemon.link = link
    return daemon


def _revoked(request: Any) -> BaseException:
    return errors.SessionRevokedError(request=request)


async def test_a_session_revoked_while_running_stops_the_daemon_with_exit_78(
    tmp_path: Path, isolated_home: Path, fake_api: FakeAnthropic
) -> None:
    link = LinkClient()
    daemon = _daemon(tmp_path, fake_api, link)
    run = asyncio.create_task(daemon.run())
    try:
        await until(lambda: daemon.status.state == "running" or run.done())
        assert not run.done(), run.result()
        health = daemon.supervisor.loops["telegram"]
        assert health.state == "up"
        # Logged out from another device: from now on Telegram refuses every request of this session, and
        # Telethon's update loop records why before it disconnects (as TelegramClient._update_loop does).
        link.fail_when = _revoked
        link._updates_error = _revoked(None)
        link.drop()
        restarts = health.restarts
        # Either the daemon stops, or it has retried the revoked session three times (it never will stop).
        await until(lambda: run.done() or health.restarts >= restarts + 4)
        state, last_error = health.state, health.last_error
        stopped = run.done()
    finally:
        if not run.done():
            daemon.stop_event.set()
        code = await asyncio.wait_for(run, BOUND_S)
    assert stopped, f"a revoked session is retried instead of stopping the daemon: {state}, {last_error}"
    assert code == EXIT_FATAL
    assert daemon.fatal is not None and daemon.fatal.startswith("telegram: ") and "revoked" in daemon.fatal
    assert "\n" not in daemon.fatal and "teleton setup" in daemon.fatal


async def test_a_session_revoked_before_start_stops_the_daemon_with_exit_78(
    tmp_path: Path, isolated_home: Path, fake_api: FakeAnthropic
) -> None:
    link = LinkClient()
    link.fail_when = lambda request: errors.AuthKeyUnregisteredError(request=request)
    daemon = _daemon(tmp_path, fake_api, link)
    code = await asyncio.wait_for(daemon.run(), BOUND_S)  # returns: systemd must not restart it (78)
    assert code == EXIT_FATAL
    assert daemon.fatal is not None and daemon.fatal.startswith("telegram: ") and "teleton setup" in daemon.fatal
    assert link.connects == 1  # not retried


# -- (c) a loop down past the grace withholds the watchdog ----------------------------------------------------


async def test_a_loop_down_past_the_grace_withholds_the_watchdog(
    tmp_path: Path, isolated_home: Path, fake_api: FakeAnthropic
) -> None:
    path = f"/tmp/tlt-wd-{os.getpid()}.sock"  # short: Unix socket paths
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind(path)
    systemd.setblocking(False)
    now = [1_000_000.0]
    config = write_config(tmp_path, fake_api.base_url)
    daemon = Daemon(load_config(config), notifier=Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "20000"}))
    daemon.supervisor = Supervisor(daemon._on_fatal, first_backoff_s=0.01, max_backoff_s=0.02, jitter_s=0,
                                   clock=lambda: now[0])  # fmt: skip
    reachable = asyncio.Event()

    async def embedding(up: Any) -> None:
        if not reachable.is_set():
            raise ConnectionError("embedding provider unreachable")
        up()
        await asyncio.Event().wait()

    def pings() -> int:
        count = 0
        while True:
            try:
                count += systemd.recv(64) == b"WATCHDOG=1"
            except BlockingIOError:
                return count

    daemon.supervisor.run("embedding", embedding)
    watchdog = asyncio.create_task(daemon.notifier.watchdog_loop(daemon._healthy))
    try:
        await until(lambda: daemon.supervisor.loops["embedding"].state == "down")
        assert daemon._healthy()  # down, but not yet for longer than the grace: still pinging
        await until(pings)
        now[0] += WATCHDOG_GRACE_S + 1
        assert daemon.supervisor.down_longer_than(WATCHDOG_GRACE_S) == ["embedding"]
        assert not daemon._healthy()  # the watchdog withholds its pings: systemd will restart the daemon
        await gather_status(daemon)  # and `teleton status` says which loop is down, since when and why
        daemon.status.updated_at = now[0]
        _, shown = describe(daemon.status, now=now[0])
        assert "embedding: down since 10m 1s ago (" in shown and "embedding provider unreachable" in shown, shown
        reachable.set()
        await until(lambda: daemon.supervisor.loops["embedding"].state == "up")
        assert daemon._healthy()
        pings()
        await until(pings)
    finally:
        watchdog.cancel()
        await daemon.supervisor.stop()
        systemd.close()
        os.unlink(path)
