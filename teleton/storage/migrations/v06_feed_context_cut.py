"""Schema step 5 -> 6: in the feed's keyword index, each earlier message puts at most ``FEED_CONTEXT_CHARS`` of
its text into a message's context (issue 30; the rule and its numbers live in ``teleton.storage.feed_context``).
Rows indexed before keep their context until they are embedded or edited (both rewrite it by the new rule).
"""

from __future__ import annotations

from teleton.storage.feed_context import FEED_CONTEXT_CHARS, feed_triggers
from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection


def migrate(conn: Connection) -> None:
    conn.execute("drop trigger if exists tg_messages_ai")
    conn.execute("drop trigger if exists tg_messages_au")
    run_script(conn, feed_triggers(FEED_CONTEXT_CHARS))
