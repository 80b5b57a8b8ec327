"""The dashboard served by uvicorn inside the caller's event loop (the daemon's, or `teleton dashboard`'s).

uvicorn's ``Server.serve`` takes SIGINT and SIGTERM for itself; the daemon's own handlers decide how it
stops, so this server leaves the signals alone and ends when ``stop`` is called. A reverse proxy's
``X-Forwarded-*`` headers are believed from this machine alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

LOOPBACK = ["127.0.0.1", "::1"]


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # the process's owner handles signals
        yield


def listen(host: str, port: int) -> socket.socket:
    """The listening socket (port 0: one the system chooses); OSError when the address is taken or wrong."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class WebServer:
    """``app`` served on ``sock`` in the background, from ``start`` until ``stop``."""

    def __init__(self, app: ASGIApp, sock: socket.socket) -> None:
        # X-Forwarded-For / -Proto believed from a proxy on this machine only, whatever FORWARDED_ALLOW_IPS
        # says: the login throttle counts clients by that address, and nobody else may choose theirs.
        config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="off", proxy_headers=True, forwarded_allow_ips=LOOPBACK
        )
        self._server = _Server(config)
        self._sock = sock
        self.port: int = sock.getsockname()[1]
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]), name="dashboard")

    async def wait(self) -> None:
        if self._task is not None:
            await self._task

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._task, timeout=5.0)
        self._sock.close()
