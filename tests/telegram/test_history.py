"""History through Telethon's real paging: backfill a chat, and fill the gap a downtime left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import structlog
from telethon import errors, functions, utils
from telethon.tl import types

from teleton.gateway.contract import GatewayError
from teleton.storage import Database
from teleton.telegram.receive.history import backfill
from tests.telegram.conftest import ALICE, BOB, GROUP, GatewayHarness, make_harness, new_message

GROUP_ID = utils.get_peer_id(GROUP)


def history_message(mid: int, sender: Any, text: str, *, age_s: float = 86_400) -> types.Message:
    return types.Message(
        id=mid,
        peer_id=types.PeerChat(GROUP.id),
        from_id=types.PeerUser(sender.id),
        date=datetime.now(UTC) - timedelta(seconds=age_s),
        message=text,
    )


class HistoryServer:
    """Answers history and dialog requests like Telegram: newest first, honouring offset_id/min_id/limit."""

    def __init__(self, messages: list[types.Message]) -> None:
        self.messages = sorted(messages, key=lambda m: -m.id)
        self.floods: list[int] = []
        self.history_requests = 0

    def answer(self, request: Any) -> Any:
        if isinstance(request, functions.messages.GetHistoryRequest):
            self.history_requests += 1
            if self.floods:
                raise errors.FloodWaitError(request=request, capture=self.floods.pop(0))
            page = [
                m
                for m in self.messages
                if m.id > request.min_id
                and (request.offset_id == 0 or m.id < request.offset_id)
                and (request.max_id == 0 or m.id < request.max_id)
            ][: request.limit]
            return types.messages.Messages(messages=page, topics=[], chats=[GROUP], users=[ALICE, BOB])
        if isinstance(request, functions.messages.GetChatsRequest):
            return types.messages.Chats(chats=[GROUP])
        if isinstance(request, functions.messages.GetDialogsRequest):
            top = self.messages[0]
            dialog = types.Dialog(
                peer=types.PeerChat(GROUP.id),
                top_message=top.id,
                read_inbox_max_id=0,
                read_outbox_max_id=0,
                unread_count=1,
                unread_mentions_count=0,
                unread_reactions_count=0,
                unread_poll_votes_count=0,
                notify_settings=types.PeerNotifySettings(),
            )
            return types.messages.Dialogs(dialogs=[dialog], messages=[top], chats=[GROUP], users=[ALICE, BOB])
        return None


def serve(h: GatewayHarness, server: HistoryServer) -> None:
    base = h.client.answer

    def answer(request: Any) -> Any:
        result = server.answer(request)
        return base(request) if result is None else result

    h.client.answer = answer  # type: ignore[method-assign]


async def test_backfill_imports_history_once_and_never_answers_it(harness: GatewayHarness) -> None:
    server = HistoryServer([history_message(i, ALICE if i % 2 else BOB, f"old message {i}") for i in range(1, 251)])
    serve(harness, server)
    seen: list[int] = []
    result = await backfill(harness.client, harness.db, str(GROUP_ID), limit=230, progress=seen.append)
    assert (result.chat_id, result.title, result.fetched, result.new) == (GROUP_ID, "Book club", 230, 230)
    assert sum(seen) == 230 and len(seen) == 3  # pages of 100, 100, 30
    again = await backfill(harness.client, harness.db, GROUP_ID, limit=None)
    assert (again.fetched, again.new) == (250, 20)  # idempotent: only the 20 older ones are new
    rows = await harness.rows(GROUP_ID)
    assert len(rows) == 250 and {r["agent_state"] for r in rows} == {"history"}
    assert harness.agent.seen == []
    names = {r["sender_name"] for r in rows}
    assert names == {"Alice", "Bob"}


async def test_backfill_rides_out_a_flood_wait(harness: GatewayHarness) -> None:
    server = HistoryServer([history_message(i, ALICE, f"m{i}") for i in range(1, 151)])
    server.floods = [1]
    serve(harness, server)
    with structlog.testing.capture_logs() as logs:
        result = await backfill(harness.client, harness.db, GROUP_ID, limit=150)
    assert result.new == 150
    waits = [(e["what"], e["seconds"]) for e in logs if e["event"] == "flood_wait"]
    assert waits == [("history", 1)]  # waited the stated second once (the wait itself is not timed) ...
    assert server.history_requests == 3  # ... then asked again: the flooded page, then pages of 100 and 50


async def test_backfill_of_an_unknown_chat_is_a_clear_error(harness: GatewayHarness) -> None:
    with pytest.raises(GatewayError, match="not found"):
        await backfill(harness.client, harness.db, "-1000000000042")


async def test_catch_up_fills_the_gap_and_answers_only_recent_messages(db: Database) -> None:
    h = await make_harness(db, require_mention=False)
    try:
        await h.dispatch(new_message(GROUP, ALICE, "before the downtime", msg_id=100, extra=(GROUP,)))
        await h.settle()
        missed = [
            history_message(101, BOB, "sent three hours ago", age_s=3 * 3600),
            history_message(102, ALICE, "sent a minute ago", age_s=60),
        ]
        serve(h, HistoryServer([history_message(100, ALICE, "before the downtime"), *missed]))
        assert await h.gateway.catch_up_archive() == 2
        # Telethon's own catch-up delivering the same message afterwards changes nothing.
        await h.dispatch(new_message(GROUP, ALICE, "sent a minute ago", msg_id=102, extra=(GROUP,)))
        await h.settle()
        assert [r["message_id"] for r in await h.rows(GROUP_ID)] == [100, 101, 102]
        assert [m.text for m in h.agent.seen] == ["before the downtime", "sent a minute ago"]
    finally:
        await h.gateway.stop(grace_s=1)
