"""A test MCP server script (``mcp_server.py``, ``noisy_mcp_server.py``) served over HTTP on a free
127.0.0.1 port, for as long as a test needs it: started, waited for until it accepts connections, killed."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping

from tests.waiting import until_sync


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def served(script: str, transport: str = "--http", env: Mapping[str, str] | None = None) -> Iterator[int]:
    """``script TRANSPORT PORT`` running (``--http`` or ``--sse``): its port, once it accepts connections."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, script, transport, str(port)], env=None if env is None else dict(env),
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def accepts() -> bool:
            assert proc.poll() is None, f"the MCP server {script} exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                return False

        until_sync(accepts)
        yield port
    finally:
        proc.kill()
        proc.wait()
