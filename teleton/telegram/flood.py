"""FloodWait: Telegram says how long to wait; we wait that long and retry, within bounds, never crash."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from telethon import errors
from tenacity import RetryCallState

from teleton.gateway.contract import GatewayError
from teleton.process.retries import failure, retrying, waits

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

    def seconds(exc: BaseException | None) -> int:
        return int(getattr(exc, "seconds", 0) or 0)

    def waited(state: RetryCallState) -> None:
        log.warning("flood_wait", what=what, seconds=seconds(failure(state)), attempt=state.attempt_number)

    tries = retrying(
        lambda exc: isinstance(exc, errors.FloodError) and seconds(exc) <= max_wait_s,
        waits(base_s=0.0, max_s=max_wait_s, told=lambda exc: float(seconds(exc))),
        attempts=attempts,
        on_retry=waited,
        sleep=sleep,
    )
    try:
        async for attempt in tries:
            with attempt:
                return await call()
    except errors.FloodError as exc:
        if seconds(exc) > max_wait_s:
            raise GatewayError(
                f"Telegram rate limit on {what}: asked to wait {seconds(exc)} s (more than the allowed "
                f"{int(max_wait_s)} s); not retried"
            ) from exc
        raise GatewayError(f"Telegram rate limit on {what}: still limited after {attempts} tries") from exc
    raise AssertionError("unreachable")
