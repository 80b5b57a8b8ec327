"""Schema step 8 -> 9: the usage ledger, what the model was used for per day and model (``teleton.storage.usage``).

One row a day per model, whatever the number of turns. ``cost_usd`` is what the turns cost at the model's price
when they ran (NULL: no price known). Step 15 (``v15_cache_writes``) rebuilt the table with
``cache_write_tokens``: the ``DDL`` below is step 9's, as released.
"""

from __future__ import annotations

from teleton.storage.migrations.sql import run_script
from teleton.storage.sqlite_driver import Connection

DDL = """
create table usage_days (
    day                text not null,               -- local date, YYYY-MM-DD
    model              text not null,
    turns              integer not null default 0,
    input_tokens       integer not null default 0,  -- cache writes included, as sessions count them
    output_tokens      integer not null default 0,
    cache_read_tokens  integer not null default 0,
    cost_usd           real,                        -- NULL: the price of the model is not known
    primary key (day, model)
);
"""


def migrate(conn: Connection) -> None:
    run_script(conn, DDL)
