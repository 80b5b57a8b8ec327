"""Schema step 9 -> 10: forum topics (issue 36).

A group with topics is many conversations in one chat. ``topic_id`` is the topic's top message id (Telegram's
thread id) and names the conversation inside its chat: 0 on a session (and NULL on a message or a reply)
means the chat's main line, which is also a forum's General topic. Each topic has its own active session,
its archived messages say which topic they were in, and a reply recorded before it goes out keeps the topic
it must land in, so a resend after a crash lands there too; a task scheduled in a topic reports there.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
alter table tg_messages add column topic_id integer;
alter table sessions add column topic_id integer not null default 0;
alter table reply_sends add column topic_id integer;
alter table tasks add column topic_id integer;
create index sessions_topic on sessions(chat_id, topic_id, active);
create index tg_messages_topic on tg_messages(chat_id, topic_id, date) where topic_id is not null;
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
