"""Schema step 14 -> 15: prompt-cache writes kept apart from the input (issue 54), so a write is priced as the
provider prices it (Anthropic: 1.25x or 2x the input price) and the hit rate is reads over all input.

From this step ``input_tokens`` counts what the API calls input (neither read from nor written to the cache)
and ``cache_write_tokens`` the writes, in the ledger and in sessions. Rows written before it kept their writes
inside ``input_tokens`` and have 0 writes: input + writes + reads is all the input on every row, old or new,
and an old day's ``cost_usd`` stays what its turns were priced at when they ran. The ledger is rebuilt (a few
hundred rows) so its column comments say so; the sessions table, with its long histories, gains a column.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table usage_days_new (
    day                text not null,               -- local date, YYYY-MM-DD
    model              text not null,
    turns              integer not null default 0,
    input_tokens       integer not null default 0,  -- not cached (rows before step 15: cache writes included)
    output_tokens      integer not null default 0,
    cache_read_tokens  integer not null default 0,
    cost_usd           real,                        -- NULL: the price of the model is not known
    cache_write_tokens integer not null default 0,  -- written to the prompt cache (0 on rows before step 15)
    primary key (day, model)
);
insert into usage_days_new(day, model, turns, input_tokens, output_tokens, cache_read_tokens, cost_usd)
    select day, model, turns, input_tokens, output_tokens, cache_read_tokens, cost_usd from usage_days;
drop table usage_days;
alter table usage_days_new rename to usage_days;
alter table sessions add column cache_write_tokens integer not null default 0;
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
