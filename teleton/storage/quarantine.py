"""Poison items, kept aside with their error so the items behind them proceed (docs/operations.md).

A text the embedder rejects, a task that fails every time, a distiller input the model chokes on: each is
recorded here once (kind + item id) and skipped from then on; ``teleton status`` counts them.
"""

from __future__ import annotations

import time

from teleton.storage.sqlite_driver import Connection

ERROR_CAP = 500


def put(conn: Connection, kind: str, item_id: int, error: str, now: float | None = None) -> None:
    conn.execute(
        "insert into quarantine(kind, item_id, error, created_at) values (?, ?, ?, ?) "
        "on conflict(kind, item_id) do update set error = excluded.error",
        (kind, int(item_id), error[:ERROR_CAP], time.time() if now is None else now),
    )


def counts(conn: Connection) -> dict[str, int]:
    return {str(kind): int(n) for kind, n in conn.execute("select kind, count(*) from quarantine group by kind")}
