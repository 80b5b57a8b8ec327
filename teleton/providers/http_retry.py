"""What the HTTP embedding providers share: which failures are worth retrying, the back-off, batching,
unit rows.

Voyage and the OpenAI-compatible endpoints answer the same way when busy (429, 5xx) or unreachable
(transport errors): retrying those with exponential back-off is right; a 4xx is the caller's mistake and is
raised at once. The synchronous twin serves the one call made while the provider is built (in a worker
thread), which learns the vector dimension.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx
import numpy as np
from tenacity import AsyncRetrying, Retrying, retry_if_exception, stop_after_attempt, wait_exponential


def transient(exc: BaseException) -> bool:
    """True for failures that may pass if tried again: rate limits, server errors, network errors."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return isinstance(exc, httpx.TransportError)


def _policy(attempts: int, max_wait: float) -> dict[str, Any]:
    return {
        "retry": retry_if_exception(transient),
        "stop": stop_after_attempt(attempts),
        "wait": wait_exponential(multiplier=0.5, max=max_wait),
        "reraise": True,
    }


def retrying(attempts: int, max_wait: float) -> AsyncRetrying:
    return AsyncRetrying(**_policy(attempts, max_wait))


def retrying_sync(attempts: int, max_wait: float) -> Retrying:
    return Retrying(**_policy(attempts, max_wait))


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
