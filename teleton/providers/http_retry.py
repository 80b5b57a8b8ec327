"""What the HTTP embedding providers share: which failures are worth retrying, the back-off, batching,
unit rows.

Voyage and the OpenAI-compatible endpoints answer the same way when busy (429, 5xx) or unreachable
(transport errors): retrying those with exponential back-off is right; a 4xx is the caller's mistake and is
raised at once. The synchronous twin serves the one call made while the provider is built (in a worker
thread), which learns the vector dimension.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import httpx
import numpy as np
from tenacity import AsyncRetrying, Retrying

from teleton.process.retries import Wait, retrying_sync, waits
from teleton.process.retries import retrying as _retrying

FIRST_WAIT_S = 0.5


def transient(exc: BaseException) -> bool:
    """True for failures that may pass if tried again: rate limits, server errors, network errors."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return isinstance(exc, httpx.TransportError)


def retry_after(response: httpx.Response) -> float | None:
    """The server's Retry-After in seconds, when it sent one as a number."""
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: rare from APIs; the exponential back-off is a fine stand-in
        return None


def http_waits(max_wait: float) -> Wait:
    """The server's Retry-After (at most ``max_wait``), else the back-off (``teleton.process.retries``)."""

    def asked(exc: BaseException) -> float | None:
        after = retry_after(exc.response) if isinstance(exc, httpx.HTTPStatusError) else None
        return None if after is None else min(after, max_wait)

    return waits(base_s=FIRST_WAIT_S, max_s=max_wait, told=asked)


def http_retrying(attempts: int, max_wait: float) -> AsyncRetrying:
    return _retrying(transient, http_waits(max_wait), attempts=attempts)


def http_retrying_sync(attempts: int, max_wait: float) -> Retrying:
    return retrying_sync(transient, http_waits(max_wait), attempts=attempts)


async def embed_in_batches(
    texts: Sequence[str], batch_size: int, dims: int, embed_batch: Callable[[list[str]], Awaitable[np.ndarray]]
) -> np.ndarray:
    """``texts`` embedded ``batch_size`` at a time (the endpoint's request limit), rows in input order."""
    out = np.zeros((len(texts), dims), dtype=np.float32)
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        out[start : start + len(batch)] = await embed_batch(batch)
    return out


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (the vector index assumes it, whatever the server returned)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)
