"""What every scripted fake model API shares: a queue of replies (then a responder), the bodies received, and a
threaded HTTP server on 127.0.0.1 with its life cycle."""

from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

R = TypeVar("R")
Body = dict[str, Any]


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-request (the kill -9 tests) resets the connection: expected, not a failure.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedServer(Generic[R]):
    """Replies queued with ``queue`` are served first, in order; then ``responder(body)`` answers."""

    def __init__(self, responder: Callable[[Body], R]) -> None:
        self.requests: list[Body] = []
        self.arrivals: list[float] = []  # perf_counter() as each request's body was read (benchmarks' end mark)
        self.responder = responder
        self._queue: collections.deque[R] = collections.deque()
        self._lock = threading.Lock()
        self._server: QuietServer | None = None
        self.host = "127.0.0.1"  # another address only for a server a container reaches (container_smoke.sh)

    def queue(self, *replies: R | Iterable[R]) -> None:
        with self._lock:
            for reply in replies:
                if isinstance(reply, Iterable) and not isinstance(reply, (str, bytes, dict)):
                    self._queue.extend(reply)
                else:
                    self._queue.append(reply)  # type: ignore[arg-type]

    def arrived(self) -> None:
        """A request's last byte is in: what the server does from here on is not the client's time."""
        with self._lock:
            self.arrivals.append(time.perf_counter())

    @property
    def pending(self) -> int:
        return len(self._queue)

    @property
    def root(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve(self, handler: type[BaseHTTPRequestHandler], name: str) -> Self:
        self._server = QuietServer((self.host, 0), handler)
        serving = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name=name)
        serving.daemon = True
        serving.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()  # type: ignore[attr-defined,no-any-return]

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, body: Body) -> R:
        with self._lock:
            self.requests.append(body)
            if self._queue:
                return self._queue.popleft()
        return self.responder(body)
