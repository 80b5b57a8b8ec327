"""Schema step 11 -> 12: which messages are the agent's answer to which message (issue 36).

``reply_parts`` keeps, per answered message, the messages its reply went out as and when, so an edit or a
deletion of the question reaches the answer (``teleton.storage.reply_parts`` reads and writes it, and says how
long rows are kept).
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table reply_parts (
    chat_id      integer not null,
    question_id  integer not null,   -- the archived message answered
    message_id   integer not null,   -- one message of the reply, in the order sent
    part         integer not null,
    sent_at      real not null,
    primary key (chat_id, question_id, part)
);
create index reply_parts_sent on reply_parts(sent_at);
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
