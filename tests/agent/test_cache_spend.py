"""What the prompt cache saved and what the day cost, as the user sees it (issue 54): a turn's cache reads and
writes priced by the provider's rule (Anthropic: writes 1.25x the input price for a 5-minute entry, 2x for a
1-hour one; a configured write price wins), and the day's hit rate and spend of every chat — from the usage
ledger — in the owner's /status and in `teleton status --json`, after turns against the fake Messages API's
cache emulation. The expected figures are computed from what the fake reported for each turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from teleton.config.schema import AgentConfig
from teleton.llm import LLMClient
from teleton.llm.client import Usage
from teleton.llm.connect import client_for
from teleton.llm.prices import Price, usd
from teleton.storage import Database, usage
from tests.agent.conftest import GROUP, MAIN_MODEL, OWNER, UTILITY_MODEL, AgentHarness, build_harness
from tests.fakes.anthropic_server import FakeAnthropic, text
from tests.foundation.test_cli import teleton

SONNET = "claude-sonnet-4-6"  # $3 in, $15 out, $0.30 cache reads per 1M; writes by the rule


def priced_client(fake: FakeAnthropic, **agent: Any) -> LLMClient:
    """The client the daemon builds from its config, for a model with a list price, against ``fake``."""
    values = {"api_key": "test", "base_url": fake.base_url, "model": MAIN_MODEL, "utility_model": UTILITY_MODEL}
    return client_for(AgentConfig(**{**values, **agent}), env={}, max_retries=2)


async def status_of(h: AgentHarness, group: bool = False) -> str:
    status = await (h.group("/status") if group else h.dm("/status"))
    assert status is not None
    return status


@pytest.fixture
async def data_db(tmp_path: Path) -> AsyncIterator[Database]:
    """The store where a config's ``storage.data_dir`` puts it, so the CLI reads the same database."""
    database = await Database.open(tmp_path / "data" / "teleton.db", embedding=("test-model", 384))
    yield database
    await database.close()


@pytest.mark.parametrize(
    ("settings", "write_price"),
    [
        ({"cache_ttl": "5m"}, 3.75),  # 1.25 x $3
        ({"cache_ttl": "1h"}, 6.0),  # 2 x $3
        ({"cache_ttl": "1h", "price_per_mtok": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 4.5}}, 4.5),
    ],
    ids=["5m", "1h", "override"],
)
async def test_a_turn_with_cache_reads_and_writes_is_priced_by_the_providers_rule(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic, settings: dict[str, Any], write_price: float
) -> None:
    llm = priced_client(fake_api, model=SONNET, **settings)
    h = await build_harness(tmp_path, db, fake_api, llm=llm)
    try:
        reported = {"input_tokens": 100_000, "output_tokens": 20_000, "cache_read_input_tokens": 400_000}
        h.main = lambda body: text("one", usage={**reported, "cache_creation_input_tokens": 200_000})
        await h.dm("first")
        # 100k not cached at $3, 20k out at $15, 400k read at $0.30, 200k written at the write price.
        cost = 0.30 + 0.30 + 0.12 + 0.2 * write_price
        assert llm.price == Price(3.0, 15.0, 0.30, write_price)
        status = await status_of(h)
        assert (
            f"- Spend: {usd(cost)} this session, {usd(cost)} last turn, {usd(cost)} today (all chats, 1 turn)" in status
        )
        assert "Tokens this session: 100,000 in, 20,000 out; cache reads 400,000, cache writes 200,000" in status
        day = await db.read(usage.spent_today)
        assert (day.input_tokens, day.cache_read_tokens, day.cache_write_tokens) == (100_000, 400_000, 200_000)
        assert round(day.cost_usd, 6) == round(cost, 6)
        assert "Prompt cache hit rate: 57% this session, 57% in the last turn; today 57% (all chats)" in status
    finally:
        await llm.close()


async def day_of_turns(h: AgentHarness) -> tuple[Usage, float]:
    """Two turns in the owner's DM and one in a group, against the fake's cache emulation: the figures the
    fake reported for them (as each turn received them), summed, and what they cost at the client's price."""
    total, cost = Usage(), 0.0
    assert h.llm.price is not None
    # An identity well over any model's minimum cacheable length (1024-4096 tokens), so the prefix caches.
    soul = "".join(f"- Rule {n}: answer the owner plainly, in the language they wrote in.\n" for n in range(220))
    (h.workspace / "SOUL.md").write_text("You are Teleton, the owner's assistant.\n" + soul)
    for say, chat in ((h.dm, OWNER.id), (h.dm, OWNER.id), (h.group, GROUP.id)):
        await say("tell me about the lighthouse")
        stats = h.agent.last_turns.get(chat)
        assert stats is not None
        u = stats.usage
        total.add(u)
        cost += h.llm.price.cost(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)
    assert total.cache_read_tokens > 0 and total.cache_write_tokens > 0  # the emulation read and wrote
    return total, cost


async def test_the_days_hit_rate_and_spend_show_in_the_owners_status_and_in_status_json(
    tmp_path: Path, data_db: Database, fake_api: FakeAnthropic
) -> None:
    llm = priced_client(fake_api, model=SONNET)
    h = await build_harness(tmp_path, data_db, fake_api, llm=llm)
    try:
        total, cost = await day_of_turns(h)
        rate = total.cache_read_tokens / total.prompt_tokens  # reads over all input: not cached + written + read
        status = await status_of(h)
        assert f"; today {100 * rate:.0f}% (all chats)" in status
        assert f", {usd(cost)} today (all chats, 3 turns)" in status
        # A group sees its own session's figures, never the day of every chat.
        group = await status_of(h, group=True)
        assert "today" not in group and "all chats" not in group

        # `teleton status --json` from another shell, the store open beside it (no daemon: exit code 1).
        home = tmp_path / "home"
        home.mkdir()
        config = home / "config.yaml"
        config.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
        config.chmod(0o600)
        proc = teleton("-c", str(config), "status", "--json", home=home)
        assert proc.returncode == 1, proc.stderr
        today = json.loads(proc.stdout)["today"]
        assert today["day"] == usage.today() and today["turns"] == 3 and today["unpriced_turns"] == 0
        tokens = (total.input_tokens, total.output_tokens, total.cache_read_tokens, total.cache_write_tokens)
        assert (today["input_tokens"], today["output_tokens"], today["cache_read_tokens"]) == tokens[:3]
        assert today["cache_write_tokens"] == tokens[3]
        assert today["cache_hit_rate"] == round(rate, 3) and today["cost_usd"] == round(cost, 6)
        print(status, proc.stdout, sep="\n\n")  # the samples the docs describe (pytest -s)
    finally:
        await llm.close()


async def test_status_json_says_why_it_has_no_day(tmp_path: Path) -> None:
    """No database yet, or one an older Teleton left (the daemon migrates it at start): today is null, and why."""
    home = tmp_path / "home"
    home.mkdir()
    config = home / "config.yaml"
    config.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
    config.chmod(0o600)
    shown = json.loads(teleton("-c", str(config), "status", "--json", home=home).stdout)
    assert shown["today"] is None and "no database yet" in shown["today_unavailable"]
    assert not (tmp_path / "data" / "teleton.db").exists()  # a reader: it creates nothing
    db = await Database.open(tmp_path / "data" / "teleton.db")
    await db.execute("update meta set value = '14' where key = 'schema_version'")
    await db.close()
    shown = json.loads(teleton("-c", str(config), "status", "--json", home=home).stdout)
    assert shown["today"] is None and "start the daemon once" in shown["today_unavailable"]
