"""How Teleton retries, in one place. Every retried call waits by the same rule: a model request, an
embedding or transcription upload, a Telegram request under FloodWait, an archive commit, a crashed loop.

- When the failure says how long to wait (an HTTP Retry-After, Telegram's FloodWait), wait that long.
- Otherwise back off exponentially from ``base_s``, doubling up to ``max_s``. Add up to ``jitter_s`` at
  random, so that clients which failed together do not retry in step.
- The last failure is raised as itself, never wrapped in tenacity's ``RetryError``: callers turn it into
  their own one-line message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_never
from tenacity import wait_exponential_jitter as _exponential

Wait = Callable[[RetryCallState], float]
# The delay a failure names for itself (None: it names none).
Told = Callable[[BaseException], float | None]
OnRetry = Callable[[RetryCallState], None]


def failure(state: RetryCallState) -> BaseException | None:
    """The exception of the attempt that just failed."""
    return state.outcome.exception() if state.outcome else None


def waits(*, base_s: float, max_s: float, jitter_s: float = 0.0, told: Told | None = None) -> Wait:
    """The wait before the next attempt: what the failure asked for, else the exponential back-off."""
    backoff = _exponential(multiplier=base_s, max=max_s, jitter=jitter_s)

    def wait(state: RetryCallState) -> float:
        error = failure(state)
        asked = told(error) if told is not None and error is not None else None
        return float(asked) if asked is not None and asked >= 0 else float(backoff(state))

    return wait


def _policy(
    retry: Callable[[BaseException], bool], wait: Wait, attempts: int | None, on_retry: OnRetry | None
) -> dict[str, object]:
    return {
        "retry": retry_if_exception(retry),
        "stop": stop_never if attempts is None else stop_after_attempt(attempts),
        "wait": wait,
        "before_sleep": on_retry,
        "reraise": True,
    }


def retrying(
    retry: Callable[[BaseException], bool],
    wait: Wait,
    *,
    attempts: int | None = None,
    on_retry: OnRetry | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncRetrying:
    """``async for attempt in retrying(...): with attempt: ...``: tries until ``retry`` says no, or
    ``attempts`` tries were made (None: no limit)."""
    return AsyncRetrying(sleep=sleep, **_policy(retry, wait, attempts, on_retry))  # type: ignore[arg-type]


def retrying_sync(retry: Callable[[BaseException], bool], wait: Wait, *, attempts: int | None = None) -> Retrying:
    """The same for the few calls made in a worker thread."""
    return Retrying(**_policy(retry, wait, attempts, None))  # type: ignore[arg-type]
