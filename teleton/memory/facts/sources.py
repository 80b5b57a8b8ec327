"""Where a fact came from: the archived messages the distiller read it from (``fact_sources``, step 13).

The distiller links each fact it keeps (new, updated, or found again) to the messages of its exchange. The
links name messages and copy nothing, so erasing a message (``/forget``) removes its links with it (the
schema's triggers); what then happens to the fact itself is what the forget rules say about its text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from teleton.storage.sqlite_driver import Connection


def link(conn: Connection, fact_id: int, chat_id: int, message_ids: Sequence[int]) -> None:
    conn.executemany(
        "insert into fact_sources(fact_id, chat_id, message_id) values (?, ?, ?) on conflict do nothing",
        [(fact_id, chat_id, m) for m in message_ids if m > 0],
    )


def of_facts(conn: Connection, fact_ids: Sequence[int]) -> dict[int, list[tuple[int, int]]]:
    """Fact id -> its sources as (chat id, message id), oldest message first."""
    rows = conn.execute(
        "select fact_id, chat_id, message_id from fact_sources where fact_id in (select value from json_each(?)) "
        "order by fact_id, chat_id, message_id",
        (json.dumps(list(fact_ids)),),
    ).fetchall()
    found: dict[int, list[tuple[int, int]]] = {}
    for fact_id, chat_id, message_id in rows:
        found.setdefault(int(fact_id), []).append((int(chat_id), int(message_id)))
    return found
