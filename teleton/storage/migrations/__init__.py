"""The schema's steps, in order: ``MIGRATIONS[i]`` takes a database from version i to i + 1 (``vNN_<what>.py``
is step NN). ``teleton.storage.schema`` applies them; ``docs/schema.sql`` is where they end.

Append only; never edit a released step (a database made by it is upgraded by the steps after it).
"""

from __future__ import annotations

from collections.abc import Callable

from teleton.storage.migrations import (
    v01_initial_schema,
    v02_privacy_labels,
    v03_fact_history,
    v04_held_items,
    v05_reply_sends,
    v06_feed_context_cut,
    v07_reply_streams,
    v08_mcp_pins,
    v09_usage_ledger,
    v10_forum_topics,
    v11_reactions,
    v12_reply_parts,
    v13_fact_sources,
    v14_mcp_review,
    v15_cache_writes,
    v16_skills,
)
from teleton.storage.sqlite_driver import Connection

Migration = Callable[[Connection], None]

MIGRATIONS: list[Migration] = [
    v01_initial_schema.migrate,
    v02_privacy_labels.migrate,
    v03_fact_history.migrate,
    v04_held_items.migrate,
    v05_reply_sends.migrate,
    v06_feed_context_cut.migrate,
    v07_reply_streams.migrate,
    v08_mcp_pins.migrate,
    v09_usage_ledger.migrate,
    v10_forum_topics.migrate,
    v11_reactions.migrate,
    v12_reply_parts.migrate,
    v13_fact_sources.migrate,
    v14_mcp_review.migrate,
    v15_cache_writes.migrate,
    v16_skills.migrate,
]
