"""FloodWait: Telegram says how long to wait; we wait that long and retry, within bounds, never crash."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from telethon import errors

from teleton.gateway.contract import GatewayError

log = structlog.get_logger(__name__)
T = TypeVar("T")

MAX_ATTEMPTS = 3


async def with_flood_retry(
    call: Callable[[], Awaitable[T]],
    *,
    max_wait_s: float,
    attempts: int = MAX_ATTEMPTS,
    what: str = "request",
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``call``; on FloodWait/SlowModeWait sleep the stated time and retry (at most ``attempts`` tries).

    A wait longer than ``max_wait_s``, or one more flood after the last try, becomes a GatewayError that
    says how long Telegram asked to wait, so the agent can tell the user instead of the daemon dying.
    """
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except errors.FloodError as exc:
            seconds = int(getattr(exc, "seconds", 0) or 0)
            if seconds > max_wait_s:
                raise GatewayError(
                    f"Telegram rate limit on {what}: asked to wait {seconds} s (more than the allowed "
                    f"{int(max_wait_s)} s); not retried"
                ) from exc
            if attempt == attempts:
                raise GatewayError(f"Telegram rate limit on {what}: still limited after {attempts} tries") from exc
            log.warning("flood_wait", what=what, seconds=seconds, attempt=attempt)
            await sleep(seconds)
    raise AssertionError("unreachable")
