"""What the model was used for, per day and model: the dashboard's spend today and this month, /status's day,
`teleton status --json`. One row a day per model, whatever the number of turns; ``cost_usd`` is what the turns
cost at the model's price when they ran (NULL: no price known). The table: ``docs/schema.sql``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from teleton.storage.sqlite_driver import Connection

# A turn's tokens in the API's terms: (input neither read from nor written to the cache, output, cache reads,
# cache writes), the order ``Price.cost`` takes them in.
Tokens = tuple[int, int, int, int]


@dataclass(frozen=True)
class Spent:
    turns: int
    input_tokens: int  # not cached (a day from before step 15: its cache writes included)
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float  # of the turns whose price was known
    unpriced_turns: int  # turns of a model without a known price

    @property
    def all_input(self) -> int:
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def hit_rate(self) -> float:
        return hit_rate(self.cache_read_tokens, self.all_input)

    def as_dict(self) -> dict[str, Any]:
        """The figures as `teleton status --json` prints them (the hit rate a share, 0..1, to 3 places)."""
        return {**asdict(self), "cost_usd": round(self.cost_usd, 6), "cache_hit_rate": round(self.hit_rate, 3)}


def hit_rate(cache_read: int, all_input: int) -> float:
    """Share of all input tokens (not cached + cache writes + cache reads) read from the prompt cache: the one
    rule /status, the dashboard and `teleton status` show, here where the ledger every one of them reads is."""
    return cache_read / all_input if all_input else 0.0


def today() -> str:
    """The ledger's day for now: the local date (a turn at 23:59 is that evening's spend, wherever the server)."""
    return datetime.now().astimezone().strftime("%Y-%m-%d")


def add(conn: Connection, day: str, model: str, tokens: Tokens, cost: float | None) -> None:
    """One turn's ``tokens`` (input, output, cache reads, cache writes) and its ``cost`` on ``day``."""
    conn.execute(
        "insert into usage_days(day, model, turns, input_tokens, output_tokens, cache_read_tokens, "
        "cache_write_tokens, cost_usd) values (?, ?, 1, ?, ?, ?, ?, ?) on conflict(day, model) do update set "
        "turns = turns + 1, input_tokens = input_tokens + excluded.input_tokens, "
        "output_tokens = output_tokens + excluded.output_tokens, "
        "cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, "
        "cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens, "
        "cost_usd = case when cost_usd is null and excluded.cost_usd is null then null "
        "else coalesce(cost_usd, 0) + coalesce(excluded.cost_usd, 0) end",
        (day, model, *tokens, cost),
    )


def spent(conn: Connection, first_day: str, last_day: str) -> Spent:
    """What the days from ``first_day`` to ``last_day`` (inclusive) used and cost."""
    row = conn.execute(
        "select coalesce(sum(turns), 0), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cache_read_tokens), 0), coalesce(sum(cache_write_tokens), 0), coalesce(sum(cost_usd), 0), "
        "coalesce(sum(case when cost_usd is null then turns else 0 end), 0) "
        "from usage_days where day between ? and ?",
        (first_day, last_day),
    ).fetchone()
    turns, input_tokens, output_tokens, reads, writes = (int(v) for v in row[:5])
    return Spent(turns, input_tokens, output_tokens, reads, writes, float(row[5]), int(row[6]))


def spent_today(conn: Connection) -> Spent:
    """Today's figures of every chat and model: the day /status, the dashboard and `teleton status` show."""
    day = today()
    return spent(conn, day, day)
