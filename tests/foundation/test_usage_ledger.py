"""The usage ledger (schema step 9, cache writes apart since step 15): a day's turns, tokens and cost per model,
summed over a period; turns of a model without a price are counted, never priced at zero silently; the hit
rate is cache reads over all input. A database from before step 15 migrates, and its days still show."""

from __future__ import annotations

from pathlib import Path

from teleton.agent.window.sessions import SessionStore
from teleton.llm.client import Usage
from teleton.storage import Database, connect, usage
from teleton.storage import schema as schema_mod
from teleton.storage.sqlite_driver import pick_driver


async def test_turns_add_up_by_day_and_model(db: Database) -> None:
    def write(conn: object) -> None:
        usage.add(conn, "2026-11-01", "claude-sonnet-4-5", (1000, 200, 5000, 300), 0.0075)
        usage.add(conn, "2026-11-01", "claude-sonnet-4-5", (500, 100, 0, 0), 0.003)
        usage.add(conn, "2026-11-02", "qwen3:8b", (800, 90, 0, 0), None)  # a local server: no price
        usage.add(conn, "2026-10-31", "claude-sonnet-4-5", (9, 9, 9, 9), 1.0)  # last month

    await db.write(write)
    day = await db.read(lambda conn: usage.spent(conn, "2026-11-01", "2026-11-01"))
    assert (day.turns, day.input_tokens, day.output_tokens, round(day.cost_usd, 4), day.unpriced_turns) == (
        2, 1500, 300, 0.0105, 0,
    )  # fmt: skip
    assert (day.cache_read_tokens, day.cache_write_tokens, day.all_input) == (5000, 300, 6800)
    assert day.hit_rate == 5000 / 6800
    month = await db.read(lambda conn: usage.spent(conn, "2026-11-01", "2026-11-30"))
    assert (month.turns, round(month.cost_usd, 4), month.unpriced_turns) == (3, 0.0105, 1)
    rows = await db.fetchall("select count(*) from usage_days")
    assert rows[0][0] == 3  # one row per day and model, whatever the number of turns
    nothing = await db.read(lambda conn: usage.spent(conn, "2020-01-01", "2020-01-01"))
    assert (nothing.all_input, nothing.hit_rate, nothing.as_dict()["cache_hit_rate"]) == (0, 0.0, 0.0)


async def test_a_database_from_before_step_15_migrates_and_its_old_rows_still_show(tmp_path: Path) -> None:
    """Before step 15 the ledger and sessions counted cache writes inside input_tokens: those rows keep their
    figures (0 writes), so all input and the hit rate are what they were, and the day's cost stays as priced."""
    path = tmp_path / "old.db"
    conn = connect(path, pick_driver(), vectors=False)
    schema_mod.migrate(conn, schema_mod.MIGRATIONS[:14])
    conn.execute(
        "insert into usage_days(day, model, turns, input_tokens, output_tokens, cache_read_tokens, cost_usd) "
        "values ('2026-11-01', 'claude-sonnet-4-5', 3, 1200, 300, 4800, 0.0123)"
    )
    conn.execute(
        "insert into sessions(id, chat_id, active, input_tokens, output_tokens, cache_read_tokens, created_at, "
        "updated_at) values ('s1', 42, 1, 1200, 300, 4800, 1, 1)"
    )
    conn.commit()
    conn.close()
    db = await Database.open(path)
    try:
        assert (db.info.schema_from, db.info.schema_to) == (14, schema_mod.SCHEMA_VERSION)
        day = await db.read(lambda conn: usage.spent(conn, "2026-11-01", "2026-11-01"))
        assert (day.turns, day.input_tokens, day.cache_read_tokens, day.cache_write_tokens) == (3, 1200, 4800, 0)
        assert (round(day.cost_usd, 4), day.all_input, day.hit_rate) == (0.0123, 6000, 0.8)
        # A new turn on that day adds its writes apart.
        await db.write(lambda conn: usage.add(conn, "2026-11-01", "claude-sonnet-4-5", (100, 10, 400, 500), 0.001))
        day = await db.read(lambda conn: usage.spent(conn, "2026-11-01", "2026-11-01"))
        assert (day.turns, day.input_tokens, day.cache_write_tokens, day.all_input) == (4, 1300, 500, 7000)
        # The session from before goes on: its old figures kept, the next turn's writes counted apart.
        sessions = SessionStore(db)
        session = await sessions.active(42)
        assert session is not None and (session.cache_write_tokens, session.all_input) == (0, 6000)
        session.account(Usage(100, 10, 400, 500), Usage(100, 10, 400, 500))
        await sessions.save(session)
        again = await sessions.active(42)
        assert again is not None
        assert (again.input_tokens, again.cache_read_tokens, again.cache_write_tokens) == (1300, 5200, 500)
        assert (await sessions.totals(42))["cache_write_tokens"] == 500
        comments = await db.fetchone("select sql from sqlite_master where name = 'usage_days'")
        assert "rows before step 15: cache writes included" in comments[0]
    finally:
        await db.close()
