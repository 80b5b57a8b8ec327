"""The scheduler's memory jobs: heartbeat (silent unless a rule fires) and consolidation (idle sessions into
memory, salience decay, due-time kept across restarts)."""

from __future__ import annotations

import time
from pathlib import Path

from teleton.agent.consolidation import Consolidation
from teleton.agent.heartbeat import SILENT, Heartbeat
from teleton.agent.runtime import AgentSettings
from teleton.memory.facts.store import Fact, FactStore
from teleton.storage import Database
from tests.agent.conftest import AgentHarness, build_harness
from tests.fakes.anthropic_server import FakeAnthropic, last_user_text, text


async def test_heartbeat_stays_silent_unless_a_rule_fires(harness: AgentHarness, fake_api: FakeAnthropic) -> None:
    (harness.workspace / "HEARTBEAT.md").write_text("- If a scheduled task failed, tell the owner.\n")
    heartbeat = Heartbeat(harness.agent, harness.agent.principals, harness.workspace)
    harness.main = lambda body: text(SILENT)
    assert await heartbeat.beat() is None
    assert "HEARTBEAT" not in harness.console_out.getvalue()
    body = harness.main_requests()[-1]
    assert "If a scheduled task failed" in last_user_text(body)

    harness.main = lambda body: text("Task #3 (backup) failed: disk full.")
    sent = await heartbeat.beat()
    assert sent == "Task #3 (backup) failed: disk full."
    assert "Task #3 (backup) failed" in harness.console_out.getvalue()


async def test_heartbeat_without_rules_does_not_call_the_model(harness: AgentHarness, fake_api: FakeAnthropic) -> None:
    assert await Heartbeat(harness.agent, harness.agent.principals, harness.workspace).beat() is None
    assert fake_api.requests == []


async def test_consolidation_summarises_idle_sessions_once_per_interval(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    settings = AgentSettings(session_reset_hour=None, session_idle_minutes=30)
    h = await build_harness(tmp_path, db, fake_api, settings)
    await h.dm("the plumber comes on Thursday at 9")
    await db.execute("update sessions set updated_at = updated_at - 3600 where active = 1")

    job = Consolidation(h.agent.scheduled.sweep_sessions, db, interval_hours=6, half_life_days=30)
    report = await job.run_if_due()
    assert report is not None and report.sessions_ended == 1
    assert (await db.fetchone("select count(*) from sessions where active = 1"))[0] == 0
    knowledge = await db.fetchall("select text from knowledge where source = 'session'")
    assert any("plumber" in row[0] for row in knowledge)
    log_text = "".join(p.read_text() for p in (h.workspace / "memory").glob("*.md"))
    assert "plumber" in log_text and "Session ended" in log_text

    assert await job.run_if_due() is None  # not due again yet
    restarted = Consolidation(h.agent.scheduled.sweep_sessions, db, interval_hours=6, half_life_days=30)
    assert await restarted.run_if_due() is None  # the last run time survived the "restart"
    assert await restarted.run_if_due(now=time.time() + 6 * 3600 + 1) is not None
    await h.llm.close()


async def test_salience_decays_for_unused_facts_only(tmp_path: Path, db: Database, fake_api: FakeAnthropic) -> None:
    facts = FactStore(db)
    stale = await facts.save(Fact("Olga likes jazz", category="preference", importance=0.9))
    pinned = await facts.save(Fact("Olga is allergic to peanuts", category="health", importance=0.97))
    fresh = await facts.save(Fact("Olga is learning Portuguese", category="plan", importance=0.9))
    long_ago = time.time() - 90 * 86400
    await db.execute("update facts set updated_at = ?, last_access = ? where id in (?, ?)",
                     (long_ago, long_ago, stale.id, pinned.id))  # fmt: skip
    h = await build_harness(tmp_path, db, fake_api)
    job = Consolidation(h.agent.scheduled.sweep_sessions, db, interval_hours=6, half_life_days=30)
    report = await job.run(now=time.time(), last=time.time() - 30 * 86400)
    assert report.facts_decayed == 1
    importance = {r[0]: r[1] for r in await db.fetchall("select id, importance from facts")}
    assert abs(importance[stale.id] - 0.7) < 1e-6  # halfway back to neutral after one half-life
    assert importance[pinned.id] == 0.97
    assert importance[fresh.id] == 0.9
    await h.llm.close()
