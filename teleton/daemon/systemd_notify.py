"""sd_notify without a dependency: a datagram to $NOTIFY_SOCKET (READY=1, WATCHDOG=1, STOPPING=1, STATUS=...).

Under ``Type=notify`` systemd considers the service started only after READY=1, and with ``WatchdogSec``
restarts it when WATCHDOG=1 stops arriving — which catches a wedged event loop, not just a dead process.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Mapping

import structlog

log = structlog.get_logger(__name__)


class Notifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        address = env.get("NOTIFY_SOCKET", "")
        # A leading '@' names a socket in the abstract namespace.
        self._address = "\0" + address[1:] if address.startswith("@") else address
        usec = env.get("WATCHDOG_USEC", "")
        self.watchdog_interval: float | None = int(usec) / 1e6 / 2 if usec.isdigit() and int(usec) > 0 else None

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def notify(self, state: str) -> bool:
        if not self._address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(state.encode(), self._address)
            return True
        except OSError as exc:
            log.warning("sd_notify_failed", error=str(exc))
            return False

    def ready(self, status: str = "") -> None:
        self.notify("READY=1" + (f"\nSTATUS={status}" if status else ""))

    def stopping(self) -> None:
        self.notify("STOPPING=1")

    def status(self, text: str) -> None:
        self.notify(f"STATUS={text}")

    async def watchdog_loop(self, healthy: Callable[[], bool] = lambda: True) -> None:
        """Ping the watchdog at half its interval while the event loop runs and ``healthy()`` holds (no
        loop stuck down): a withheld ping makes systemd restart the daemon."""
        if self.watchdog_interval is None or not self.enabled:
            return
        while True:
            if healthy():
                self.notify("WATCHDOG=1")
            await asyncio.sleep(self.watchdog_interval)
