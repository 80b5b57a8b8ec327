"""The failover chain: which provider answers the main model's requests, and when the primary gets another try.

The rule, in one place: a provider that still fails with a transient error (5xx, 529, a timeout, no
connection) after its retries hands the same request to the next one in ``agent.fallbacks``. A rejected key,
a bad request or a context overflow is not an outage: the next provider would fail the same way or hide a
mistake, so those reach the caller unchanged. While a fallback answers, the primary is tried once (no
retries: its outage must not slow every turn) whenever ``retry_s`` has passed, and takes over again as soon
as it answers. The clock is injected so a test advances the cool-down instead of waiting for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from teleton.llm.types import Provider
from teleton.text.lines import reason

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Route:
    """One provider in the chain; ``model`` None keeps the request's own model (the primary's)."""

    name: str
    provider: Provider
    model: str | None = None


@dataclass(frozen=True)
class Attempt:
    index: int
    probe: bool  # a single try of the primary during an outage: no retries


class Failover:
    """Which route answers now, since when and why; a primary without fallbacks is a chain of one."""

    def __init__(
        self,
        routes: Sequence[Route],
        *,
        retry_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.routes = list(routes)
        self.retry_s = retry_s
        self.clock = clock  # monotonic: decides the cool-down
        self.wall = wall  # for the "since HH:MM" people read
        self.active = 0
        self.since: float | None = None
        self.reason = ""
        self.next_probe = 0.0

    def plan(self) -> list[Attempt]:
        """The routes to try for one request, in order."""
        rest = [Attempt(i, False) for i in range(self.active, len(self.routes))]
        if self.active and self.clock() >= self.next_probe:
            return [Attempt(0, True), *rest]
        return rest

    def failed(self, index: int) -> None:
        """A route gave up on a request; a failing primary is not tried again before the cool-down."""
        if index == 0:
            self.next_probe = self.clock() + self.retry_s

    def answered(self, index: int, reason: str) -> None:
        """``routes[index]`` answered: switch to it if it is not the current one, and say so."""
        if index == self.active:
            return
        before, after = self.routes[self.active], self.routes[index]
        if index == 0:
            log.warning("llm_failback", to=after.name, after_s=round(self.wall() - (self.since or self.wall())))
            self.since, self.reason = None, ""
        else:
            log.warning("llm_failover", **{"from": before.name}, to=after.name, reason=reason)
            self.since, self.reason = self.wall(), reason
        self.active = index

    def status(self) -> str | None:
        """One line for /status while a fallback answers; None while the primary does."""
        if not self.active or self.since is None:
            return None
        route = self.routes[self.active]
        at = time.strftime("%H:%M", time.localtime(self.since))
        return (
            f"answering with {route.name} ({route.model}) since {at} because {self.reason}; "
            f"primary ({self.routes[0].name}) retried every {self.retry_s:g} s"
        )


def failover_reason(error: Exception) -> str:
    """The cause in a few words, for the log and /status."""
    return reason(error, 120)
