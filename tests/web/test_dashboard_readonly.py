"""`teleton dashboard` without a daemon (issue 35): the pages read the store opened read-only — facts with
their history, a keyword memory search, the chats, the day's spend and prompt-cache hit rate from the usage
ledger (said so on the page) — and change nothing (409); a store another version wrote is said in one line,
and the status is still served.

Issue 56: a terminal user's home as `teleton chat` and `teleton mcp add` leave it (the real commands, the
scripted model API): every figure comes from the store or the config and says so — the archive's count, the
model, the configured MCP server, the tools a turn with a message is offered (those the turn itself was sent),
the chat log and where the login token is; tool descriptions are cut at a word."""

from __future__ import annotations

import asyncio
import contextlib
import html
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from teleton.agent.window.sessions import SessionStore
from teleton.backup.schedule import record_failure
from teleton.config import Config
from teleton.gateway.contract import ChatInfo
from teleton.memory.facts.rows import Fact
from teleton.memory.facts.store import FactStore
from teleton.memory.feed import archive as fa
from teleton.storage import Database, connect
from teleton.storage.schema import SCHEMA_VERSION
from teleton.storage.sqlite_driver import pick_driver
from teleton.tools.suite import build_registry
from tests.agent.conftest import build_harness
from tests.agent.test_cache_spend import SONNET, day_of_turns, priced_client
from tests.fakes.anthropic_server import FakeAnthropic, text, user_said
from tests.web.conftest import owner_client

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times

TOKEN = "readonly-" + "r" * 40
MCP_FAKE = str(Path(__file__).parents[1] / "fakes" / "mcp_server.py")
ASKED = "remind me tomorrow at 9 to water the plants"  # the last thing said in the terminal, and the page's test
SAID = ["hello", "/tool disable web_fetch", *(f"note {n}: the boat needs paint" for n in range(9)), ASKED]


def _env(home: Path) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_"))}
    return {**kept, "HOME": str(home)}


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        f"storage: {{data_dir: {tmp_path / 'data'}}}\nembedding: {{provider: none}}\n"
        f"telegram: {{owner_id: 1001}}\nweb: {{token: {TOKEN}}}\n"
    )
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def _dashboard(tmp_path: Path, config: Path | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    config = config or _config(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(config), "dashboard", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path),
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


@dataclass(frozen=True)
class Terminal:
    """A terminal user's home, and what the model was sent for ``ASKED``."""

    home: Path
    config: Path
    url: str
    token: str
    offered: list[str]

    @property
    def data(self) -> Path:
        return self.home / ".teleton"


def _teleton(home: Path, *args: str, said: str | None = None) -> None:
    command = [sys.executable, "-m", "teleton.cli.main", *args]
    done = subprocess.run(command, input=said, capture_output=True, text=True, env=_env(home), timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def terminal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Terminal]:
    """`teleton chat` (a tool disabled with /tool on the way), then `teleton mcp add`; then `teleton dashboard`
    with no daemon: its config as the user keeps it, no web.token (the token file), the default data dir."""
    home = tmp_path_factory.mktemp("terminal")
    config = home / ".teleton" / "config.yaml"
    config.parent.mkdir(mode=0o700)
    with FakeAnthropic() as fake:
        fake.responder = lambda body: text(f"Noted: {user_said(body)[:30]}")
        agent = {"api_key": "test", "base_url": fake.base_url, "model": "claude-test", "utility_model": "claude-mini"}
        config.write_text(yaml.safe_dump({"agent": agent, "embedding": {"provider": "none"}}))
        config.chmod(0o600)
        _teleton(home, "chat", said="\n".join(SAID) + "\n")
        asked = [body for body in fake.requests if body["model"] == "claude-test" and user_said(body) == ASKED]
    _teleton(home, "mcp", "add", "calc", "--", sys.executable, MCP_FAKE)
    with _dashboard(home, config) as (url, _):
        token = (home / ".teleton" / "dashboard.token").read_text().strip()
        yield Terminal(home, config, url, token, [tool["name"] for tool in asked[-1]["tools"]])


def _shown(page: str, field: str) -> str:
    """What the element ``data-field=field`` shows, as text."""
    found = re.search(rf'data-field="{field}"[^>]*>(.*?)</', page, re.S)
    assert found is not None, field
    return html.unescape(found.group(1)).strip()


def _row(page: str, first_cell: str) -> list[str]:
    """The cells, as text, of the table row whose first cell is ``first_cell``."""
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", td)).strip() for td in re.findall(r"<td>(.*?)</td>", row, re.S)]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r}")


def _stored_messages(database: Path) -> int:
    conn = connect(database, pick_driver(), vectors=False, readonly=True)
    try:
        return int(conn.execute("select count(*) from tg_messages").fetchone()[0])
    finally:
        conn.close()


def test_the_archived_count_is_the_stores(terminal: Terminal) -> None:
    with owner_client(terminal.url, terminal.token) as http:
        page = http.get("/status").text
    assert _stored_messages(terminal.data / "teleton.db") == 2 * len(SAID)  # each line and its answer
    assert _shown(page, "archived") == f"{2 * len(SAID)}"
    assert _shown(page, "archived_from") == "from the database, no daemon running"


def test_the_model_is_named_from_the_config_and_the_turns_from_the_ledger(terminal: Terminal) -> None:
    with owner_client(terminal.url, terminal.token) as http:
        page = http.get("/status").text
    assert _shown(page, "model") == "claude-test (anthropic)"
    assert _shown(page, "model_from") == "from the config, no daemon running"
    assert _shown(page, "turns") == f"{len(SAID) - 1}"  # /tool is a command, not a turn
    assert _shown(page, "turns_from").startswith("today, from the usage ledger in the database;")


def test_the_configured_mcp_server_is_listed_with_its_pinned_tools(terminal: Terminal) -> None:
    with owner_client(terminal.url, terminal.token) as http:
        tools, status = http.get("/tools").text, http.get("/status").text
    _, state, pinned, waiting, _ = _row(tools, "calc")
    assert state.startswith("not connected (no daemon running)") and waiting == ""
    assert "mcp_calc_add" in pinned.split(", ") and "none configured" not in tools
    assert _row(status, "calc")[1] == state


def test_the_tools_offered_for_a_message_are_those_the_turn_was_offered(terminal: Terminal) -> None:
    with owner_client(terminal.url, terminal.token) as http:
        page = html.unescape(http.get("/tools", params={"message": ASKED, "kind": "owner"}).text)
    found = re.search(r'<p class="picks">(\d+) tools? offered: (.*?)</p>', page, re.S)
    assert found is not None
    names = re.findall(r"<code>(.*?)</code>", found.group(2))
    assert int(found.group(1)) == len(terminal.offered) and sorted(names) == sorted(terminal.offered)
    assert "web_fetch" not in names  # disabled in the chat with /tool: the turn was not offered it either
    assert "Outside (MCP) tools are not counted" in page


def test_the_logs_page_names_the_chat_log_and_shows_its_last_lines(terminal: Terminal) -> None:
    chat_log = terminal.data / "chat.log"
    with owner_client(terminal.url, terminal.token) as http:
        page = http.get("/logs").text
    said = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert f"Where the log is: the log file of teleton chat, {chat_log}" in said and "journalctl" not in said
    last = chat_log.read_text().splitlines()[-3:]
    shown = [html.unescape(line) for line in re.findall(r'<li class="level-\w+">(.*?)</li>', page, re.S)]
    assert shown[-3:] == last


def test_the_login_page_names_the_token_file(terminal: Terminal) -> None:
    page = html.unescape(httpx.get(terminal.url + "/login", timeout=30).text)
    assert f"The token is in the file {terminal.data / 'dashboard.token'}" in re.sub(r"<[^>]+>", "", page)
    assert "web.token</code> in your config file" not in page


def test_a_long_tool_description_is_cut_at_a_word_and_says_so(terminal: Terminal) -> None:
    with owner_client(terminal.url, terminal.token) as http:
        page = http.get("/tools").text
    described = {t.name: " ".join(t.description.split()) for t in build_registry(Config()).tools()}
    long = [name for name, said in described.items() if len(said) > 200]
    assert long
    for name in long:
        cut = _row(page, name)[4]
        assert cut.endswith("…") and len(cut) < len(described[name])
        head = cut.removesuffix("…")
        assert described[name].startswith(head) and not described[name][len(head)].isalnum(), (name, cut)
