"""`teleton chat`: the same agent as the admin's DM, in a terminal, built from a config file."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from pathlib import Path

import structlog
import typer
import yaml
from rich.console import Console
from typer.testing import CliRunner

from teleton.cli.chat_cmd import ChatSession, chat
from teleton.config import load_config
from teleton.storage import Database
from tests.fakes.anthropic_server import FakeAnthropic, Reply, text, tool_use, user_said
from tests.waiting import until


def write_config(tmp_path: Path, fake: FakeAnthropic) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "agent": {
                    "api_key": "test",
                    "base_url": fake.base_url,
                    "model": "claude-test",
                    "utility_model": "claude-test-small",
                },
                "storage": {"data_dir": str(tmp_path / "data")},
                "embedding": {"provider": "none"},
                "telegram": {"owner_id": 4242},
            }
        )
    )
    path.chmod(0o600)  # it holds a key: a config others can read is refused
    return path


def model(body: dict) -> Reply:
    said = user_said(body)
    if said == "remember: the boat is blue":
        return tool_use(("memory_save", {"value": "The boat is blue"}))
    if said.startswith("Saved"):
        return text("Saved it.")
    return text(f"You said: {said}")


async def test_chat_session_is_the_admin_dm(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    fake_api.responder = model
    config = load_config(write_config(tmp_path, fake_api), env={})
    out = io.StringIO()
    session = await ChatSession.open(config, Console(file=out, width=100))
    assert await session.turn("hello there") == "You said: hello there"
    await session.turn("remember: the boat is blue")
    body = [b for b in fake_api.requests if b["model"] == "claude-test"][-1]  # not the distiller's
    assert "The boat is blue" in str(body["messages"])
    assert "Your owner" in body["system"][0]["text"]
    agent, chat_ = session.stack.agent, session.gateway.chat
    assert chat_.type == "dm" and agent.is_admin(session.gateway.user)
    offered = {t["name"] for t in session.stack.registry.schemas(chat_, True)}
    assert {"memory_read", "memory_write"} <= offered  # DM-only tools are there for tool RAG to pick
    status = await session.turn("/status")
    assert status and "Session: 6 messages" in status
    listed = await session.turn("/help") or ""
    assert "- /exit — leave (or Ctrl-D)" in listed and "- /attach PATH [caption]" in listed
    assert listed.count("/stop") == 1  # the agent's own, listed once
    await session.close()
    assert "You said: hello there" in out.getvalue()
    # Messages are archived like Telegram ones, so a new terminal session continues the numbering.
    session = await ChatSession.open(config, Console(file=io.StringIO()))
    assert await session.turn("again") == "You said: again"
    rows = await session.db.fetchall("select message_id from tg_messages order by message_id")
    ids = [r[0] for r in rows]
    assert ids == sorted(set(ids)) and len(ids) == 10
    await session.close()


def test_chat_command_reading_lines_from_a_pipe(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    fake_api.responder = model
    config_path = write_config(tmp_path, fake_api)
    app = typer.Typer()

    @app.callback()
    def main(ctx: typer.Context) -> None:
        from teleton.cli.context import state

        state(ctx).config_path = config_path

    app.command()(chat)
    try:
        result = CliRunner().invoke(app, ["chat"], input="hi from the terminal\n/exit\n")
    finally:  # chat configured the process's logging for its terminal: give the next test a clean one
        logging.getLogger().handlers.clear()
        structlog.reset_defaults()
    assert result.exit_code == 0, result.output
    assert "You said: hi from the terminal" in result.output
    # The conversation owns the screen: the info log went to its file, not between the answers.
    for event in ("turn_done", "schema_migrated", "tool_index_synced"):
        assert event not in result.output
    assert '"event": "turn_done"' in (tmp_path / "data" / "chat.log").read_text()


async def test_ctrl_c_stops_the_answer_not_the_chat(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    import asyncio
    import os
    import signal

    config = load_config(write_config(tmp_path, fake_api), env={})
    config.memory.distill = False
    session = await ChatSession.open(config, Console(file=io.StringIO()))
    fake_api.queue(text("far too slow", delay=120))  # only Ctrl-C can end this turn
    turn = asyncio.create_task(session.turn("write me an epic poem"))
    await until(lambda: fake_api.requests)  # the turn reached the model
    os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C does
    assert await asyncio.wait_for(turn, 60) is None  # hang guard: the stalled answer was abandoned
    fake_api.responder = model
    assert await session.turn("still there?") == "You said: still there?"
    stored = await session.stack.agent.sessions.active(session.gateway.chat.id)
    assert [m["role"] for m in stored.messages] == ["user", "assistant", "user", "assistant"]
    await session.close()


def test_settings_follow_the_config() -> None:
    from teleton.agent.runtime import AgentSettings
    from teleton.config import Config

    config = Config()
    config.memory.context_feed = 3
    config.memory.min_score = 0.2
    config.agent.max_iterations = 4
    config.telegram.owner_id = 9
    settings = AgentSettings.from_config(config)
    assert settings.context.feed == 3 and settings.context.params.min_score == 0.2
    assert settings.limits.max_iterations == 4 and settings.limits.tool_timeout_s == 90
    assert settings.thresholds == type(settings.thresholds)(200_000, 0.5, 0.75, 200, 20)
    assert settings.masking_keep == 10 and settings.daily_log_lines == 100
    assert settings.slow_notice_s == 20  # on for the daemon and the terminal; AgentSettings() alone: off


async def test_what_is_said_in_chat_is_embedded_like_telegram_messages(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    from teleton.memory.embeddings.local import LocalEmbedder
    from teleton.memory.embeddings.packaged import packaged_model
    from teleton.storage import Database

    fake_api.responder = model
    config = load_config(write_config(tmp_path, fake_api), env={})
    config.memory.distill = False
    session = await ChatSession.open(config, Console(file=io.StringIO()), embedder=LocalEmbedder(packaged_model()))
    try:
        await session.turn("the spare key is under the blue flowerpot")
    finally:
        await session.close()  # flushes what is still waiting for a vector
    db = await Database.open(config.storage.database)
    try:
        counts = await db.fetchone("select count(*), sum(embedded = 1) from tg_messages")
    finally:
        await db.close()
    assert tuple(counts) == (2, 2)  # the question and the answer both have vectors


async def test_a_file_attached_in_the_terminal_is_read_like_a_telegram_document(
    tmp_path: Path, fake_api: FakeAnthropic
) -> None:
    fake_api.responder = lambda body: text("Got it.")
    config = load_config(write_config(tmp_path, fake_api), env={})
    session = await ChatSession.open(config, Console(file=io.StringIO(), width=100))
    shopping = tmp_path / "shopping.md"
    shopping.write_text("# Saturday\n- two hinges\n- a blue kettle\n")
    assert await session.turn(f"/attach {shopping} what is on my list?") == "Got it."
    body = [b for b in fake_api.requests if b["model"] == "claude-test"][-1]
    typed = user_said(body)
    assert typed.startswith("what is on my list?\n[document shopping.md, text extracted]") and "blue kettle" in typed
    assert await session.turn(f"/attach {tmp_path / 'missing.pdf'}") is None  # named on screen, nothing sent
    await session.close()


async def test_commands_and_their_replies_are_kept_but_never_relevant(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    from teleton.memory.feed.search import search_feed  # deferred: as the agent's retrieval runs it

    fake_api.responder = model
    config = load_config(write_config(tmp_path, fake_api), env={})
    session = await ChatSession.open(config, Console(file=io.StringIO()))
    try:
        await session.turn("the cache on the boat holds two spare keys")
        assert "cache hits" in (await session.turn("/help") or "")
        assert "cache reads" in (await session.turn("/status") or "")
        found = await search_feed(session.db, "cache", chat_ids=None)
        rows = await session.db.fetchone("select count(*) from tg_messages")
        await session.turn("and the anchor?")
    finally:
        await session.close()
    # Nor are they recent messages: the next turn's request holds neither command nor reply.
    asked = str([b for b in fake_api.requests if b["model"] == "claude-test"][-1]["messages"])
    assert "the cache on the boat holds two spare keys" in asked
    assert "/help" not in asked and "/status" not in asked and "cache hits" not in asked and "cache reads" not in asked
    # The message about a cache and its answer are found; /help's "cache hits" and /status's "cache reads" are
    # not, though all six messages are archived.
    said = "the cache on the boat holds two spare keys"
    assert sorted(h.text for h in found) == sorted([said, f"You said: {said}"]) and rows[0] == 6


def with_calc_server(path: Path) -> Path:
    """The config at ``path`` with the test MCP server as ``calc``, its add tool only."""
    raw = yaml.safe_load(path.read_text())
    fake_server = str(Path(__file__).parents[1] / "fakes" / "mcp_server.py")
    raw["mcp"] = {
        "servers": {"calc": {"command": sys.executable, "args": [fake_server], "tools": {"include": ["add"]}}}
    }
    path.write_text(yaml.safe_dump(raw))
    return path


async def test_an_mcp_server_serves_teleton_chat_too(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    """The terminal is the owner's DM: the server's review is printed in the conversation, the owner approves
    it there with its code, and its owner-only tools are offered and called there."""
    path = with_calc_server(write_config(tmp_path, fake_api))

    def adder(body: dict) -> Reply:
        said = user_said(body)
        if "tool_result" in str(body["messages"][-1]["content"]):
            return text("done: " + str(body["messages"][-1]["content"][0]["content"]))
        if said == "add 2 and 2":
            return tool_use(("mcp_calc_add", {"a": 2, "b": 2}))
        return text("?")

    fake_api.responder = adder
    out = io.StringIO()
    session = await ChatSession.open(load_config(path, env={}), Console(file=out, width=200))
    try:
        assert session.mcp is not None
        await session.mcp.wait_connected("calc")
        assert "MCP server calc: it connected for the first time" in out.getvalue()
        approve = re.search(r"/mcp approve calc(?: \S+)? [0-9a-f]{8}", out.getvalue())
        assert approve is not None
        assert (await session.turn(approve.group(0)) or "").startswith("Approved on calc:")
        assert await session.turn("add 2 and 2") == "done: > (from an outside server's tool (outside: mcp:calc)) 4"
    finally:
        await session.close()
    assert session.mcp.status()["calc"]["state"] == "stopped"


async def test_the_owner_approves_a_changed_mcp_tool_with_a_slash_command(
    tmp_path: Path, fake_api: FakeAnthropic
) -> None:
    path = with_calc_server(write_config(tmp_path, fake_api))
    config = load_config(path, env={})
    db = await Database.open(config.storage.database_file)  # add was approved once, saying something else
    await db.execute(
        "insert into mcp_pins(server, tool, digest, description, state, changed_at) "
        "values ('calc', 'add', 'then', 'Add two numbers.', 'approved', 0)"
    )
    await db.close()
    fake_api.responder = lambda body: text("ok")
    out = io.StringIO()
    session = await ChatSession.open(config, Console(file=out, width=200))
    try:
        assert session.mcp is not None
        await session.mcp.wait_connected("calc")
        assert "new or changed" in out.getvalue() and "/mcp approve calc" in out.getvalue()
        assert await session.turn("/mcp") == "calc: connected, 0 tools\n  waiting for /mcp approve calc: add"
        assert "mcp_calc_add" not in session.stack.registry.names
        shown = await session.turn("/mcp approve calc") or ""  # what waits, whole, and its code: nothing approved
        assert "> description: [MCP server calc] Add two integers." in shown
        assert "mcp_calc_add" not in session.stack.registry.names
        code = re.search(r"/mcp approve calc (\S+ )?([0-9a-f]{8})", shown)
        assert code is not None
        assert await session.turn(code.group(0)) == "Approved on calc: add. Offered from your next message."
        assert "mcp_calc_add" in session.stack.registry.names
        assert await session.turn("/mcp approve calc") == "Nothing of calc waits for approval."
    finally:
        await session.close()


async def test_the_terminal_prompt_says_where_and_who_is_who(tmp_path: Path, fake_api: FakeAnthropic) -> None:
    fake_api.responder = model
    config = load_config(write_config(tmp_path, fake_api), env={})
    db = await Database.open(config.storage.database_file)  # a line an earlier version archived as "You"
    await db.execute(
        "insert into tg_messages(chat_id, message_id, date, text, sender_id, sender_name, is_outgoing)"
        " values (1, 1, 1700000000, 'the lighthouse is red', 4242, 'You', 0)"
    )
    await db.close()
    session = await ChatSession.open(config, Console(file=io.StringIO()))
    await session.turn("hello there")
    await session.turn("/new")
    await session.turn("what did I say")
    body = [b for b in fake_api.requests if b["model"] == "claude-test"][-1]
    system, said = body["system"][0]["text"], json.dumps(body["messages"])
    assert "in a terminal" in system and "You are talking on Telegram" not in system
    assert "## Your owner\nThe person typing in this terminal is your owner." in system
    assert "Your Telegram account" not in system and "4242, id 4242" not in system
    assert "You are answering your owner." in said
    # Recalled lines name the owner and the agent apart: never "You:" beside "you:".
    assert "Owner: hello there" in said and "you: You said: hello there" in said
    assert "You: " not in said
    names = await session.db.fetchall("select distinct sender_name from tg_messages where is_outgoing = 0")
    assert [n[0] for n in names] == ["Owner"]
    await session.close()
