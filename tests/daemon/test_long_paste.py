"""A 1 MB paste through the real daemon, against a Messages API that answers an oversized request the way the
real one does (400 "prompt is too long"): the paste is answered, and so is every message after it — the
conversation is not wedged, and the paste is archived whole."""

from __future__ import annotations

import json
from pathlib import Path

from tests.daemon.harness import OWNER, Daemon, db_rows, write_config
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, prompt_too_long, text, user_said

OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
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
