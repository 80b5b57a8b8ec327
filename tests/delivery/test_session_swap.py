"""A session swap is one transaction (``SessionStore.replace``): when the new session cannot be written the old
one is not ended either, so a chat never has no active session, and it never has two.

The fault is injected in the storage itself: a trigger that aborts the INSERT of the new session, as a
failing write would (no code of Teleton's is replaced)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import pytest

from teleton.agent.runtime import AgentSettings
from teleton.agent.window.compaction import Thresholds
from teleton.agent.window.sessions import SessionStore
from teleton.memory.feed import message_life as life
from teleton.storage import Database
from tests.agent.conftest import OWNER, OWNER_DM, build_harness
from tests.delivery.support import answer_state, archive_accepted
from tests.fakes.anthropic_server import FakeAnthropic, text, user_said

POISON = "POISONED-SUMMARY"
ABORT_NEW_SESSION = (
    "create trigger fail_new_session before insert on sessions when new.summary like '%POISONED%' "
    "begin select raise(abort, 'simulated write failure'); end"
)


async def _active(db: Database, chat_id: int) -> list[str]:
    rows = await db.fetchall("select id from sessions where chat_id = ? and active = 1", (chat_id,))
    return [r[0] for r in rows]


async def test_a_failed_replace_leaves_the_old_session_active_and_untouched(db: Database) -> None:
    store = SessionStore(db)
    old = await store.create(42, messages=[{"role": "user", "content": "hello"}])
    await db.execute(ABORT_NEW_SESSION)
    with pytest.raises(Exception, match="simulated write failure"):
        await store.replace(old, "compacted", "the old part", carried=POISON)
    assert await _active(db, 42) == [old.id]  # the end of the old session was rolled back with the insert
    row = await db.fetchone("select active, end_reason, ended_at, summary from sessions where id = ?", (old.id,))
    assert tuple(row) == (1, None, None, "")
    assert (await db.fetchone("select count(*) from sessions"))[0] == 1
    # The writer is not wedged: the same swap succeeds once the storage accepts it.
    await db.execute("drop trigger fail_new_session")
    new = await store.replace(old, "compacted", "the old part", carried="fine now")
    assert await _active(db, 42) == [new.id]


async def test_concurrent_swaps_and_creates_never_leave_two_active_sessions(db: Database) -> None:
    store = SessionStore(db)
    for chat_id in range(1, 21):
        old = await store.create(chat_id)
        await asyncio.gather(
            store.replace(old, "compacted", "s", carried="next"),
            store.create(chat_id),
            store.replace(old, "idle", "s"),
            store.create(chat_id),
        )
        assert len(await _active(db, chat_id)) == 1
    rows = await db.fetchall("select chat_id, count(*) from sessions where active = 1 group by chat_id")
    assert sorted(tuple(r) for r in rows) == [(c, 1) for c in range(1, 21)]


async def test_a_compaction_whose_swap_fails_keeps_the_chat_in_its_old_session(
    tmp_path: Path, db: Database, fake_api: FakeAnthropic
) -> None:
    settings = AgentSettings(
        session_reset_hour=None, session_idle_minutes=None, thresholds=Thresholds(max_messages=4, keep_last=2)
    )
    h = await build_harness(tmp_path, db, fake_api, settings)
    h.main = lambda body: text(f"answer to: {user_said(body)}")
    base = h.utility
    h.utility = lambda body: text(POISON) if "Summarise this conversation" in user_said(body) else base(body)
    try:
        await h.dm("first")
        await h.dm("second")
        (old_id,) = await _active(db, OWNER_DM.id)
        await db.execute(ABORT_NEW_SESSION)
        third = h.message(OWNER_DM, OWNER, "third: this turn compacts and its swap fails")
        await archive_accepted(db, third)
        with contextlib.suppress(Exception):  # the turn may fail; the chat must keep its session
            await h.agent.handle(third)
        assert await _active(db, OWNER_DM.id) == [old_id]
        state, note = await answer_state(db, OWNER_DM.id, third.message_id)
        assert state == life.STATE_FAILED and note, (state, note)  # failed with a reason, not left open
        await db.execute("drop trigger fail_new_session")
        assert await h.dm("fourth") == "answer to: fourth"
    finally:
        await h.llm.close()
    (active_id,) = await _active(db, OWNER_DM.id)
    retired = await db.fetchall("select id, end_reason from sessions where chat_id = ? and active = 0", (OWNER_DM.id,))
    assert [tuple(r) for r in retired] == [(old_id, "compacted")] and active_id != old_id
    active = json.loads((await db.fetchone("select messages_json from sessions where id = ?", (active_id,)))[0])
    assert "fourth" in [m["content"] for m in active if m["role"] == "user"]
