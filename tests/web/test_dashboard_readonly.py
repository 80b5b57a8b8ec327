"""`teleton dashboard` without a daemon (issue 35): the pages read the store opened read-only — facts with
their history, a keyword memory search, the chats, the day's spend and prompt-cache hit rate from the usage
ledger (said so on the page) — and change nothing (409); a store another version wrote is said in one line,
and the status is still served."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from teleton.agent.window.sessions import SessionStore
from teleton.backup.schedule import record_failure
from teleton.gateway.contract import ChatInfo
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.store import FactStore
from teleton.memory.feed import archive as fa
from teleton.storage import Database
from teleton.storage.schema import SCHEMA_VERSION
from teleton.storage.sqlite_driver import pick_driver
from tests.agent.conftest import build_harness
from tests.agent.test_cache_spend import SONNET, day_of_turns, priced_client
from tests.fakes.anthropic_server import FakeAnthropic
from tests.web.conftest import owner_client

TOKEN = "readonly-" + "r" * 40


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"storage: {{data_dir: {tmp_path / 'data'}}}\nembedding: {{provider: none}}\n"
        f"telegram: {{owner_id: 1001}}\nweb: {{token: {TOKEN}}}\n"
    )
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def _dashboard(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(_config(tmp_path)), "dashboard", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("dashboard (read-only) on http://127.0.0.1:"), first
        yield first.split(" on ")[1].split("/ ")[0], proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _seed(database: Path) -> None:
    db = await Database.open(database)
    facts = FactStore(db)
    old = await facts.save(Fact("The boat is called Seagull", category="boats", key="boat_name"))
    await facts.save(Fact("The boat is called Albatross", category="boats", key="boat_name", replaces=old.id))
    now = time.time()

    def archive(conn: object) -> None:
        fa.upsert_chat(conn, ChatInfo(id=-100555, type="group", title="Sailors"), now)
        said = fa.MessageRecord(-100555, 1, now, "the regatta is on Sunday", sender_id=7, sender_name="Mallory")
        fa.insert_message(conn, said)

    await db.write(archive)
    sessions = SessionStore(db)  # the group's main line, and one forum topic with its own conversation
    await sessions.create(-100555, messages=[{"role": "user", "content": "when is the regatta?"}])
    await sessions.create(-100555, topic=77, messages=[{"role": "user", "content": "who brings the spinnaker?"}])
    await db.close()


async def test_the_pages_read_the_store_and_change_nothing(tmp_path: Path) -> None:
    database = tmp_path / "data" / "teleton.db"
    await _seed(database)
    before = database.read_bytes()
    with _dashboard(tmp_path) as (url, _), owner_client(url, TOKEN) as http:
        facts = http.get("/facts").text
        assert "The boat is called Albatross" in facts and "<del>The boat is called Seagull</del>" in facts
        assert facts.count('method="post"') == 1  # log out: no edit, forget or save form, read-only
        found = http.get("/memory", params={"q": "regatta"}).text
        assert "the regatta is on Sunday" in found and "chat -100555, Mallory" in found
        chats = http.get("/chats").text
        assert "Sailors" in chats and "topic 77" in chats and 'href="/chats/-100555?topic=77"' in chats
        topic = http.get("/chats/-100555", params={"topic": 77}).text
        assert "who brings the spinnaker?" in topic and "when is the regatta?" not in topic  # its own session
        assert "when is the regatta?" in http.get("/chats/-100555").text
        assert (
            "Nothing is waiting for your approval." in http.get("/approvals").text
            or "Read-only" in http.get("/approvals").text
        )
        csrf = facts.split('name="csrf" value="')[1].split('"')[0]
        assert http.post("/facts/1/edit", data={"csrf": csrf, "value": "x"}).status_code == 409
        assert http.post("/tools/web_fetch/disable", data={"csrf": csrf}).status_code == 409
    assert database.read_bytes() == before  # not a byte written


async def test_a_store_of_another_version_is_said_and_the_status_still_served(tmp_path: Path) -> None:
    database = tmp_path / "data" / "teleton.db"
    await _seed(database)
    conn = pick_driver().module.connect(str(database))
    conn.execute("update meta set value = '7' where key = 'schema_version'")  # as an older Teleton left it
    conn.commit()
    conn.close()
    with _dashboard(tmp_path) as (url, proc), owner_client(url, TOKEN) as http:
        assert http.get("/status").status_code == 200
        assert "Memory is searched where the daemon runs" in http.get("/memory").text
    assert proc.stderr is not None
    said = proc.stderr.read()
    assert f"schema version 7 and this Teleton reads {SCHEMA_VERSION}: start the daemon once" in said


async def test_the_days_spend_and_cache_hit_rate_are_read_from_the_store(
    tmp_path: Path, fake_api: FakeAnthropic
) -> None:
    database = tmp_path / "data" / "teleton.db"
    db = await Database.open(database)
    llm = priced_client(fake_api, model=SONNET)
    try:
        total, cost = await day_of_turns(await build_harness(tmp_path, db, fake_api, llm=llm))
    finally:
        await llm.close()
        await db.close()
    with _dashboard(tmp_path) as (url, _), owner_client(url, TOKEN) as http:
        page = http.get("/status").text
    assert page.split('data-field="spend_today">')[1].split("</dd>")[0] == f"${cost:,.2f} · 3 turns"
    rate = 100 * total.cache_read_tokens / total.prompt_tokens
    shown = (
        f"{rate:.0f}% read from the cache · {total.prompt_tokens:,} input tokens, {total.cache_write_tokens:,} written"
    )
    assert page.split('data-field="cache_today">')[1].split("</dd>")[0] == shown
    assert "read from the usage ledger in the database, opened read-only" in page


def test_the_last_backup_is_shown_and_a_failed_one_stands_out(tmp_path: Path) -> None:
    database = tmp_path / "data" / "teleton.db"
    asyncio.run(_seed(database))
    env = {**os.environ, "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "teleton.cli.main", "-c", str(_config(tmp_path)), "backup"]
    subprocess.run(command, check=True, capture_output=True, env=env, timeout=120)
    (archive,) = (tmp_path / "data" / "backups").glob("teleton-*.tar.gz")
    with _dashboard(tmp_path) as (url, _), owner_client(url, TOKEN) as http:
        shown = http.get("/status").text.split('data-field="last_backup"')[1].split("</dd>")[0]
    assert "verified" in shown and str(archive) in shown and 'class="down"' not in shown
    record_failure(tmp_path / "data", time.time(), "No space left on device (/backups)")  # as the daemon's schedule
    with _dashboard(tmp_path) as (url, _), owner_client(url, TOKEN) as http:
        shown = http.get("/status").text.split('data-field="last_backup"')[1].split("</dd>")[0]
    assert 'class="down"' in shown and "FAILED" in shown and "No space left on device" in shown
