"""Schema step 8 -> 9: what the model was used for, per day and model (the dashboard's spend today and this
month). One row a day per model, whatever the number of turns: a heavy user's year is a few hundred rows.
``cost_usd`` is what the turns cost at the model's price when they ran (NULL: no price known)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Spent:
    turns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float  # of the turns whose price was known
    unpriced_turns: int  # turns of a model without a known price


def migrate_usage(conn: Connection, run_script: Callable[[Connection, str], None]) -> None:
    run_script(conn, DDL)


def add(conn: Connection, day: str, model: str, tokens: tuple[int, int, int], cost: float | None) -> None:
    """One turn's ``tokens`` (input with cache writes, output, cache reads) and its ``cost`` on ``day``."""
    conn.execute(
        "insert into usage_days(day, model, turns, input_tokens, output_tokens, cache_read_tokens, cost_usd) "
        "values (?, ?, 1, ?, ?, ?, ?) on conflict(day, model) do update set turns = turns + 1, "
        "input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens, "
        "cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, "
        "cost_usd = case when cost_usd is null and excluded.cost_usd is null then null "
        "else coalesce(cost_usd, 0) + coalesce(excluded.cost_usd, 0) end",
        (day, model, *tokens, cost),
    )


def spent(conn: Connection, first_day: str, last_day: str) -> Spent:
    """What the days from ``first_day`` to ``last_day`` (inclusive) used and cost."""
    row = conn.execute(
        "select coalesce(sum(turns), 0), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cost_usd), 0), coalesce(sum(case when cost_usd is null then turns else 0 end), 0) "
        "from usage_days where day between ? and ?",
        (first_day, last_day),
    ).fetchone()
    return Spent(int(row[0]), int(row[1]), int(row[2]), float(row[3]), int(row[4]))
