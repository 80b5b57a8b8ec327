"""/stop while a turn is compacting (docs/operations.md, "a session swap always completes under the chat's lock"):
the swap finishes, the chat is left with exactly one active session, the stopped message and the next
exchange live in that session, and nothing is written into the session just retired."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from teleton.agent.runtime import AgentSettings
from teleton.agent.window.compaction import Thresholds
from teleton.memory.feed import message_life as life
from teleton.storage import Database
from tests.agent.conftest import OWNER, OWNER_DM, AgentHarness, build_harness
from tests.delivery.support import Gate, answer_state, archive_accepted
from tests.fakes.anthropic_server import Body, FakeAnthropic, Reply, text, tool_use, user_said
from tests.waiting import until

SUMMARY = "Summary: the owner asked about plants, bees and the weather."


def _is_summary(body: Body) -> bool:
    return body["model"] == "claude-test-small" and "Summarise this conversation" in user_said(body)


async def _send(h: AgentHarness, said: str) -> tuple[int, str | None]:
    msg = h.message(OWNER_DM, OWNER, said)
    await archive_accepted(h.db, msg)
    return msg.message_id, await h.agent.handle(msg)


async def _sessions(db: Database) -> list[dict]:
    rows = await db.fetchall(
        "select id, active, end_reason, summary, messages_json from sessions where chat_id = ? order by created_at",
        (OWNER_DM.id,),
    )
    return [dict(r) | {"messages": json.loads(r["messages_json"])} for r in rows]


async def test_stop_while_the_summary_is_in_flight_keeps_everything_in_the_active_session(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    settings = AgentSettings(
        session_reset_hour=None, session_idle_minutes=None, thresholds=Thresholds(max_messages=6, keep_last=2)
    )
    h = await build_harness(tmp_path, db, fake_api, settings)
    gate = Gate()
    compacting = [False]

    def utility(body: Body) -> Reply:
        if "Extract the durable facts" in user_said(body):
            return tool_use(("record_facts", {"facts": []}))
        if _is_summary(body) and compacting[0]:
            gate.hold()  # the summary request stays in flight until the test has sent /stop
        return text(SUMMARY)

    h.utility = utility
    h.main = lambda body: text(f"answer to: {user_said(body)}")
    try:
        for said in ("tell me about plants", "and bees?", "and the weather?"):
            _, reply = await _send(h, said)
            assert reply == f"answer to: {said}"
        (before,) = await _sessions(db)
        assert len(before["messages"]) == 6  # at the hard threshold: the next turn compacts first

        compacting[0] = True
        stopped = h.message(OWNER_DM, OWNER, "the stopped question")
        await archive_accepted(db, stopped)
        turn = asyncio.create_task(h.agent.handle(stopped))
        await until(gate.entered.is_set)
        assert await h.dm("/stop") == "Stopped."
        # The next message arrives while the swap is still running: it waits for the chat's lock.
        following = h.message(OWNER_DM, OWNER, "the next question")
        await archive_accepted(db, following)
        after = asyncio.create_task(h.agent.handle(following))
        for _ in range(50):
            await asyncio.sleep(0)
        assert not turn.done() and not after.done()  # the swap is not abandoned half-way
        gate.open()
        assert await asyncio.wait_for(turn, 60) is None
        assert await asyncio.wait_for(after, 60) == "answer to: the next question"
    finally:
        gate.open()
        await h.llm.close()

    sessions = await _sessions(db)
    retired = [s for s in sessions if not s["active"]]
    active = [s for s in sessions if s["active"]]
    assert len(active) == 1 and len(retired) == 1, [(s["active"], s["end_reason"]) for s in sessions]
    assert retired[0]["id"] == before["id"] and retired[0]["end_reason"] == "compacted"
    assert retired[0]["summary"] == SUMMARY  # the compaction completed
    # Nothing was written into the retired session after it was retired.
    assert retired[0]["messages"] == before["messages"]
    said_in_active = [m["content"] for m in active[0]["messages"] if m["role"] == "user"]
    assert active[0]["summary"] == SUMMARY
    assert "the stopped question" in said_in_active, active[0]["messages"]
    assert "the next question" in said_in_active, active[0]["messages"]
    assert await answer_state(db, OWNER_DM.id, stopped.message_id) == (life.STATE_FAILED, "stopped by the user")
    assert await answer_state(db, OWNER_DM.id, following.message_id) == (life.STATE_ANSWERED, None)
    assert "answer to: the stopped question" not in [m.text for m in h.gateway.sent]
