"""The usage ledger (schema step 9): a day's turns, tokens and cost per model, summed over a period; turns of a
model without a price are counted, never priced at zero silently."""

from __future__ import annotations

from teleton.storage import Database, usage


async def test_turns_add_up_by_day_and_model(db: Database) -> None:
    def write(conn: object) -> None:
        usage.add(conn, "2026-11-01", "claude-sonnet-4-5", (1000, 200, 5000), 0.0075)
        usage.add(conn, "2026-11-01", "claude-sonnet-4-5", (500, 100, 0), 0.003)
        usage.add(conn, "2026-11-02", "qwen3:8b", (800, 90, 0), None)  # a local server: no price
        usage.add(conn, "2026-10-31", "claude-sonnet-4-5", (9, 9, 9), 1.0)  # last month

    await db.write(write)
    day = await db.read(lambda conn: usage.spent(conn, "2026-11-01", "2026-11-01"))
    assert (day.turns, day.input_tokens, day.output_tokens, round(day.cost_usd, 4), day.unpriced_turns) == (
        2, 1500, 300, 0.0105, 0,
    )  # fmt: skip
    month = await db.read(lambda conn: usage.spent(conn, "2026-11-01", "2026-11-30"))
    assert (month.turns, round(month.cost_usd, 4), month.unpriced_turns) == (3, 0.0105, 1)
    rows = await db.fetchall("select count(*) from usage_days")
    assert rows[0][0] == 3  # one row per day and model, whatever the number of turns
