"""Failed logins slowed per client (issue 53): guessing the token from one address gains almost nothing.

A client's first ``free`` wrong tokens are answered at once; each further one makes it wait before another
attempt is even checked — ``first_s``, doubling, at most ``cap_s``. An attempt within the wait is refused
unchecked (429, Retry-After), so even the right token is not tried then. A good login clears the client;
so does an hour (``forget_s``) without a failure. At most ``max_clients`` are remembered, the least recently
seen dropped first, so a flood of addresses cannot grow memory.

The client is the address the dashboard sees: the connection's, or, from a reverse proxy on this machine,
the ``X-Forwarded-For`` it sets (uvicorn trusts that header from loopback only: ``server.py``). IPv6 clients
count by their /64, the block one machine is usually given, so walking through its addresses is one client.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

FREE = 5  # wrong tokens answered at once: room for a few typos
FIRST_S, CAP_S = 1.0, 300.0  # the first wait, doubled each failure after, never more than 5 minutes
FORGET_S = 3600.0  # a client quiet this long starts again
MAX_CLIENTS = 10_000  # about 2 MB at most


class Failure(NamedTuple):
    failures: int  # wrong tokens in a row from this client
    wait_s: float  # before its next attempt is checked (0: at once)
    started: bool  # this failure began the client's throttling: the one log line of the burst


@dataclass(slots=True)
class _Client:
    failures: int = 0
    last: float = 0.0  # when it last failed
    until: float = 0.0  # no attempt is checked before this


class LoginThrottle:
    """Wrong logins per client; ``clock`` gives seconds (monotonic), a parameter so tests need no sleeps."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        free: int = FREE,
        first_s: float = FIRST_S,
        cap_s: float = CAP_S,
        forget_s: float = FORGET_S,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self.clock, self.free, self.first_s, self.cap_s = clock, free, first_s, cap_s
        self.forget_s, self.max_clients = forget_s, max_clients
        self._clients: OrderedDict[str, _Client] = OrderedDict()

    def __len__(self) -> int:
        return len(self._clients)

    def retry_after(self, client: str) -> int:
        """Whole seconds ``client`` must wait before its attempt is checked; 0: check it now."""
        state = self._seen(client)
        if state is None:
            return 0
        return max(0, math.ceil(state.until - self.clock()))

    def failed(self, client: str) -> Failure:
        """A wrong token from ``client`` (checked: it was not waiting)."""
        now = self.clock()
        state = self._seen(client) or self._add(client)
        state.failures += 1
        state.last = now
        over = state.failures - self.free
        # The exponent is bounded: a guesser at the cap for days must not overflow the float.
        wait = min(self.cap_s, self.first_s * 2 ** min(over - 1, 64)) if over > 0 else 0.0
        state.until = now + wait
        return Failure(state.failures, wait, over == 1)

    def succeeded(self, client: str) -> None:
        self._clients.pop(client, None)

    def _seen(self, client: str) -> _Client | None:
        """The client's state, now the most recently seen; None when unknown or forgotten."""
        state = self._clients.get(client)
        if state is None:
            return None
        now = self.clock()
        if now - state.last >= self.forget_s and now >= state.until:
            del self._clients[client]
            return None
        self._clients.move_to_end(client)
        return state

    def _add(self, client: str) -> _Client:
        while len(self._clients) >= self.max_clients:
            self._clients.popitem(last=False)
        state = self._clients[client] = _Client()
        return state


def client_key(host: str | None) -> str:
    """Who is counted: the address, an IPv6 one by its /64 (an IPv4 in IPv6 as the IPv4 it is)."""
    if not host:
        return "unknown"  # no peer address (a Unix socket): all such clients count as one
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)
