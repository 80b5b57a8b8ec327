"""The Status page's figures, each with where it comes from: the daemon's own record while a daemon answers;
otherwise the store (opened read-only) and the config, and the page says so. What only a running daemon
knows (this run's turns, its queues and loops) is said to be unknown, never shown as 0.

    stored = await db.read(read_stored)                      # no daemon: the archive as the store holds it
    view |= figures(view, config.agent, stored, live=False)  # view: daemon.dashboard.status_view's dict
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from teleton.config.schema import AgentConfig
from teleton.memory.feed import archive, reads
from teleton.storage.sqlite_driver import Connection

NO_DAEMON = "no daemon running"
FROM_STORE = "from the database, no daemon running"
FROM_CONFIG = "from the config, no daemon running"
FROM_LEDGER = "today, from the usage ledger in the database; no daemon running to count a run's"
UNREAD = "unknown: no daemon running, and the database could not be read"
SPEND = ("spend_today", "spend_month", "cache_today")


@dataclass(frozen=True)
class Stored:
    """What the daemon's status record counts of the store (``daemon.health.gather_status``), read from it."""

    archived: int
    messages: dict[str, int]


def read_stored(conn: Connection) -> Stored:
    """The same readers as the daemon's record: the archive's newest row, messages by answer state."""
    return Stored(reads.newest_row(conn), archive.answer_counts(conn))


def figure(value: str, source: str = "") -> dict[str, str]:
    return {"value": value, "from": source}


def figures(view: dict[str, Any], agent: AgentConfig, stored: Stored | None, *, live: bool) -> dict[str, Any]:
    """What the Status page shows beside ``view`` (``status_view``'s record, and the ledger's spend when read):
    each figure as ``{"value", "from"}``, the messages by state, the live record's tables and the word for an
    empty one. ``live``: a daemon answers (its record is this moment's); else ``stored``, read from the store."""
    model = f"{agent.model} ({agent.provider})"
    if live:
        return _live(view["status"] or {}, model)
    today = view.get("today")
    return {
        "figures": {
            "archived": figure(f"{stored.archived:,}", FROM_STORE) if stored else figure("unknown", UNREAD),
            "turns": figure(f"{today['turns']:,}", FROM_LEDGER) if today else figure("unknown", UNREAD),
            "model": figure(model, FROM_CONFIG),
        },
        "messages": stored.messages if stored else {},
        "messages_from": FROM_STORE if stored else UNREAD,
        "live": {},  # the last run's queues and loops are not this moment's
        "idle": NO_DAEMON,
        "rss_text": NO_DAEMON,
        **{name: UNREAD for name in SPEND if name not in view},
    }


def _live(record: dict[str, Any], model: str) -> dict[str, Any]:
    said = record.get("model_retrying") or "answering"
    return {
        "figures": {
            "archived": figure(f"{record.get('archived_messages', 0):,}"),
            "turns": figure(f"{record.get('turns', 0):,}", "since the daemon started"),
            "model": figure(f"{model} · {said}"),
        },
        "messages": record.get("messages") or {},
        "messages_from": "",
        "live": record,
        "idle": "none",
    }
