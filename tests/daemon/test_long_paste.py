"""Long pastes through the real daemon. A 1 MB paste, against a Messages API that answers an oversized request
the way the real one does (400 "prompt is too long"): the paste is answered, and so is every message after it —
the conversation is not wedged, and the paste is archived whole. A 10 MB paste in a group (whose searches rank
with the group's own statistics): answered once, its follow-ups in order, and none of them carries the paste
again (what it costs is scripts/bench_long_paste.py's to measure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.daemon.harness import OWNER, Daemon, db_rows, write_config
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, prompt_too_long, text, user_said

pytestmark = pytest.mark.costly

OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
GROUP = {"id": -100_700, "type": "group", "title": "Ops"}
PASTE = "BEGIN of the pasted log\n" + "a line of the pasted log\n" * 42_000 + "END of the pasted log"
WINDOW_CHARS = 200_000  # stands in for the model's context window


def model(body: Body) -> Reply:
    if len(json.dumps(body)) > WINDOW_CHARS:
        return prompt_too_long()
    said = user_said(body)
    return text("4" if said == "what is 2+2" else f"read {len(said)} characters")


def test_a_1mb_paste_then_every_later_message_is_answered(daemon_root: Path) -> None:
    assert len(PASTE) > 1_000_000
    with FakeAnthropic() as api:
        api.responder = model
        config = write_config(daemon_root, api.base_url, **{"embedding.provider": "none"})
        daemon = Daemon(daemon_root, config).start()
        try:
            daemon.send(OWNER_DM, PASTE, message_id=1)
            daemon.wait_for(lambda ev: len(daemon.sent(OWNER["id"])) == 1)
            for n, question in enumerate(["what is 2+2", "what is 2+2"], start=2):
                daemon.send(OWNER_DM, question, message_id=n)
                daemon.wait_for(lambda ev, n=n: len(daemon.sent(OWNER["id"])) == n)
        finally:
            daemon.stop()
        too_long = [b for b in api.requests if len(json.dumps(b)) > WINDOW_CHARS]
    replies = [e["text"] for e in daemon.sent(OWNER["id"])]
    assert replies[0].startswith("read ") and replies[1:] == ["4", "4"], replies
    assert too_long == []  # no request ever carried the paste whole
    assert db_rows(daemon_root, "select text, agent_state from tg_messages where message_id = 1") == [
        (PASTE, "answered")
    ]
    kept = daemon_root / "state" / "workspace" / "chats" / str(OWNER["id"]) / "long-messages" / "1.txt"
    assert kept.read_text() == PASTE


BIG = "BEGIN of the pasted log\n" + "a line of the pasted log\n" * 200_000 + "MIDDLE-MARK of the log\n"
BIG += "a line of the pasted log\n" * 200_000 + "END of the pasted log"
FOLLOW_UPS = ["what is 2+2", "and what did the log say at the end?", "thanks!"]
INPUT_LIMIT = 20_000  # agent.max_input_chars, the default


def last_line(body: Body) -> str:
    return user_said(body).splitlines()[-1]


def test_a_10mb_paste_is_answered_once_and_its_follow_ups_in_order_without_it(daemon_root: Path) -> None:
    assert len(BIG) > 10_000_000
    with FakeAnthropic() as api:
        api.responder = lambda body: text(f"answer to: {last_line(body)}")
        config = write_config(daemon_root, api.base_url, **{"embedding.provider": "none"})
        daemon = Daemon(daemon_root, config).start()
        try:
            for n, said in enumerate([BIG, *FOLLOW_UPS], start=1):
                daemon.send(GROUP, said, message_id=n, mentions_us=True)
                daemon.wait_for(lambda ev, n=n: len(daemon.sent(GROUP["id"])) == n)
        finally:
            daemon.stop()
        requests = list(api.requests)
    asked = ["END of the pasted log", *(f"Olga (@olga): {q}" for q in FOLLOW_UPS)]
    assert [last_line(body) for body in requests] == asked  # one request a message: the paste answered once
    assert [e["text"] for e in daemon.sent(GROUP["id"])] == [f"answer to: {line}" for line in asked]
    # The paste reaches the model as its excerpt, in its own turn and in the session after it; never whole.
    sizes = [len(json.dumps(body)) for body in requests]
    assert all(size < 4 * INPUT_LIMIT for size in sizes), sizes
    assert not any("MIDDLE-MARK" in json.dumps(body) for body in requests)
    states = db_rows(daemon_root, "select message_id, agent_state from tg_messages where chat_id = ? and not "
                     "is_outgoing order by message_id", (GROUP["id"],))  # fmt: skip
    assert states == [(1, "answered"), (2, "answered"), (3, "answered"), (4, "answered")]
