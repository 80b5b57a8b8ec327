"""Schema step 10 -> 11: reactions and the answers people marked wrong (issue 36).

``tg_reactions`` archives who reacted to which message with what, and when; a reaction taken back keeps its
row with ``removed_at``. ``user_id`` 0 stands for people Telegram only counts (a big group shows the recent
few reactors by name, the rest as numbers). ``feedback`` holds an answer of ours that someone judged: a
negative reaction, or a reply saying it was wrong. It names the archived messages of the exchange (the
question, our answer, the reply) and copies none of their words, so forgetting a message forgets it here
too. It belongs to its chat: it is read at that chat's label only, never elsewhere.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table tg_reactions (
    chat_id     integer not null,
    message_id  integer not null,
    user_id     integer not null,
    emoji       text not null,           -- the emoji, or 'custom:<document id>', or 'paid'
    date        real not null,
    removed_at  real,
    primary key (chat_id, message_id, user_id, emoji)
);
create index tg_reactions_date on tg_reactions(date);
create table feedback (
    id          integer primary key,
    chat_id     integer not null,
    answer_id   integer not null,        -- our message that was judged
    question_id integer,                 -- the message it answered
    user_id     integer not null,
    signal      text not null,           -- the reaction's emoji, or 'reply'
    reply_id    integer,                 -- the reply that said it was wrong
    created_at  real not null,
    unique (chat_id, answer_id, user_id, signal)
);
create index feedback_chat on feedback(chat_id, created_at);
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
