"""Schema step 4 -> 5: replies recorded before they go out, so a restart resends them once (issue 30).

``reply_sends`` holds each reply a turn sends to its own chat, written in the same transaction that marks
its messages ``sending``: the words, where they reply, and ``random_base`` — part ``i`` of the reply goes
out with Telegram's ``random_id`` ``random_base + i``, and Telegram refuses a second message with a
``random_id`` it has seen (``RANDOM_ID_DUPLICATE``). After a crash, recovery sends what is still ``pending``
again from ``parts_sent`` on, with the same ids: a part that did go out comes back as a duplicate instead of
a second message. ``failure`` is the turn's reason when the words are its apology.

``tg_messages.mentions_us`` keeps the gate's one fact the text does not hold (a mention by entity), so a
message cut before its verdict was written is judged after a restart exactly as it was live.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table reply_sends (
    id           integer primary key,
    chat_id      integer not null,
    answers      text not null default '[]',   -- JSON: the archived messages this reply answers
    task_id      integer,                       -- or the scheduled task whose reply it is
    text         text not null,
    reply_to     integer,
    random_base  integer not null,
    parts_sent   integer not null default 0,
    state        text not null default 'pending' check (state in ('pending', 'sent', 'failed')),
    failure      text,
    created_at   real not null
);
create index reply_sends_pending on reply_sends(chat_id, id) where state = 'pending';
alter table tg_messages add column mentions_us integer not null default 0;
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
