"""Schema step 12 -> 13: which archived messages each fact was drawn from (issue 37, provenance).

``fact_sources`` links a fact to the messages of the exchange the distiller read it from: the person's
message(s) and the answer. A fact found again in another exchange gains that exchange's messages too. A
message erased from the archive (``/forget``, ``telegram.deleted_messages: erase``) takes its links with it,
and so does a deleted fact: the triggers keep the table from ever naming what is gone.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table fact_sources (
    fact_id     integer not null,
    chat_id     integer not null,
    message_id  integer not null,
    primary key (fact_id, chat_id, message_id)
);
create index fact_sources_message on fact_sources(chat_id, message_id);
create trigger fact_sources_message_gone after delete on tg_messages begin
    delete from fact_sources where chat_id = old.chat_id and message_id = old.message_id;
end;
create trigger fact_sources_fact_gone after delete on facts begin
    delete from fact_sources where fact_id = old.id;
end;
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
