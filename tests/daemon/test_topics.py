"""Forum topics through the real daemon over the loopback transport (whose protocol carries the topic).

Two topics of one group, messages interleaved: each topic's reply lands in that topic and its conversation is
its own session. A long reply in a topic cut by kill -9 between its parts resumes after the restart, and the
parts sent again land in the same topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.daemon.harness import Daemon, db_rows, write_config
from tests.fakes.anthropic_server import FakeAnthropic, text

pytestmark = pytest.mark.costly

FORUM = {"id": -1009001, "type": "group", "title": "Makers"}
GARDEN, BIKES = 500, 600
MAIN = "claude-test"


def said(body: dict[str, Any]) -> list[str]:
    """Every user message of the conversation the model was shown, as typed (the last text block of each)."""
    out = []
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            out.append(content if isinstance(content, str) else content[-1].get("text", ""))
    return out


def answered(root: Path, message_id: int) -> bool:
    """The message's turn is over: its reply went out and was archived."""
    rows = db_rows(root, "select agent_state from tg_messages where chat_id = ? and message_id = ?",
                   (FORUM["id"], message_id))  # fmt: skip
    return rows == [("answered",)]


@pytest.fixture
def api() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        server.responder = lambda body: (
            text("seen: " + " / ".join(s.splitlines()[-1] for s in said(body))) if body["model"] == MAIN else text("ok")
        )
        yield server


def test_each_topic_is_its_own_conversation_and_replies_land_in_it(api: FakeAnthropic, daemon_root: Path) -> None:
    daemon = Daemon(daemon_root, write_config(daemon_root, api.base_url)).start()
    try:
        steps = [(GARDEN, "@teleton_agent the roses need pruning"), (BIKES, "@teleton_agent new tyres arrived"),
                 (GARDEN, "@teleton_agent and the hedge?"), (BIKES, "@teleton_agent and the pump?")]  # fmt: skip
        for n, (topic, words) in enumerate(steps, start=1):
            daemon.send(FORUM, words, message_id=n, mentions_us=True, topic_id=topic)
            daemon.wait_for(lambda _events, n=n: answered(daemon_root, n))
        replies = daemon.sent(FORUM["id"])
        assert [(r["topic_id"], r["reply_to"]) for r in replies] == [(GARDEN, 1), (BIKES, 2), (GARDEN, 3), (BIKES, 4)]
        assert "roses" in replies[2]["text"] and "tyres" not in replies[2]["text"]  # the garden's own conversation
        assert "tyres" in replies[3]["text"] and "roses" not in replies[3]["text"]
        sessions = db_rows(daemon_root, "select topic_id from sessions where chat_id = ? and active = 1 "
                                        "order by topic_id", (FORUM["id"],))  # fmt: skip
        assert sessions == [(GARDEN,), (BIKES,)]
        archived = db_rows(daemon_root, "select topic_id, count(*) from tg_messages where chat_id = ? "
                                        "group by topic_id order by topic_id", (FORUM["id"],))  # fmt: skip
        assert archived == [(GARDEN, 4), (BIKES, 4)]  # two questions and two answers each, in their topics
    finally:
        daemon.stop()


def test_a_long_reply_in_a_topic_cut_by_kill_9_resumes_in_that_topic(api: FakeAnthropic, daemon_root: Path) -> None:
    paragraphs = [f"Paragraph {i}: " + ("word " * 700).strip() for i in range(3)]  # ~3,500 characters each
    api.responder = lambda body: text("\n\n".join(paragraphs)) if body["model"] == MAIN else text("ok")
    config = write_config(daemon_root, api.base_url)
    killed = Daemon(daemon_root, config)
    killed.env["TELETON_LOOPBACK_DIE_AFTER"] = "1"  # dies right after the chat received the first part
    killed.start()
    killed.send(FORUM, "@teleton_agent tell me a long story", message_id=1, mentions_us=True, topic_id=GARDEN)
    assert killed.wait() == -9
    killed.stop()

    daemon = Daemon(daemon_root, config).start()
    try:
        daemon.wait_for(lambda _events: answered(daemon_root, 1))
        got = daemon.received(FORUM["id"])
        assert len(got) == 3 and len({r["text"] for r in got}) == 3  # each part once
        assert [r["topic_id"] for r in got] == [GARDEN, GARDEN, GARDEN]  # the resent parts too
        assert len([b for b in api.requests if b["model"] == MAIN]) == 1  # not asked again
    finally:
        daemon.stop()
