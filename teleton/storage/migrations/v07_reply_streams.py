"""Schema step 6 -> 7: a streamed answer cut by a restart is finished in its own message (issue 32).

``reply_streams`` names the message a private chat's answer is being streamed into (sent at its first
words, edited as more arrive), with the archived messages it answers; it is written as soon as Telegram
returns the message's id and goes when the answer's reply record takes it over (or the turn ends). The
messages stay owed an answer meanwhile, so a restart answers them again, and the new answer is edited into
that message instead of arriving beside half of the old one.

``reply_sends.edits`` is that message, on the reply record of a streamed answer: part 0 of the reply is an
edit of it, not a new message (``teleton/telegram/send/streaming.py``), when sent live or again after a crash.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table reply_streams (
    chat_id     integer not null,
    message_id  integer not null,               -- our streamed message
    answers     text not null default '[]',     -- JSON: the archived messages its answer is for
    started_at  real not null,
    primary key (chat_id, message_id)
);
alter table reply_sends add column edits integer;
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
