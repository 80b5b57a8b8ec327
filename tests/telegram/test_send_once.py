"""Telegram's own idempotency (issue 30): each part of a reply carries our ``random_id``, a reply cut while
sending is sent again with the same ids, and Telegram's RANDOM_ID_DUPLICATE means "it arrived before" —
counted delivered and archived from the chat's history, never a second message. And a mention by entity
survives a restart: recovery judges the message as the live gate did."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from telethon import errors, functions
from telethon.tl import types

from teleton.agent.delivery.records import MessageDelivery
from teleton.gateway.contract import Once
from teleton.memory.feed import message_life as life
from teleton.storage import Database
from tests.telegram.conftest import ALICE, GROUP, ME, GatewayHarness, make_harness, new_message

LONG = "\n\n".join(f"Part {i}: " + " ".join(["word"] * 700) for i in range(3))  # three messages


async def test_each_part_goes_out_with_its_own_random_id_from_the_recorded_base(harness: GatewayHarness) -> None:
    await harness.gateway.send_message(ALICE.id, LONG, once=Once(random_base=7_000))
    assert [r.random_id for r in harness.client.sent()] == [7_000, 7_001, 7_002]


async def test_a_resend_skips_the_parts_confirmed_and_keeps_the_ids(harness: GatewayHarness) -> None:
    confirmed: list[int] = []

    async def confirm(n: int) -> None:
        confirmed.append(n)

    await harness.gateway.send_message(ALICE.id, LONG, once=Once(7_000, parts_sent=1, confirm=confirm))
    sent = harness.client.sent()
    assert [r.random_id for r in sent] == [7_001, 7_002] and sent[0].message.startswith("Part 1")
    assert confirmed == [2, 3]


async def test_a_duplicate_random_id_is_delivered_and_archived_from_the_chat_history(harness: GatewayHarness) -> None:
    """The reply reached the chat before a crash; sent again, Telegram refuses the duplicate: nothing new
    arrives, the send succeeds, and the message Telegram holds is archived as ours."""
    harness.client.history = [
        types.Message(id=4242, peer_id=types.PeerUser(ALICE.id), date=datetime.now(UTC), message="pong", out=True)
    ]

    def duplicate(request: Any) -> BaseException | None:
        if isinstance(request, functions.messages.SendMessageRequest) and request.random_id == 9_000:
            return errors.RandomIdDuplicateError(request=request)
        return None

    harness.client.fail_when = duplicate
    sent = await harness.gateway.send_message(ALICE.id, "pong", once=Once(9_000))
    assert sent.message_id == 4242
    [row] = await harness.db.fetchall("select message_id, text, is_outgoing from tg_messages where chat_id = ?",
                                      (ALICE.id,))  # fmt: skip
    assert tuple(row) == (4242, "pong", 1)


async def test_recovery_resends_a_cut_reply_with_its_ids_and_the_message_ends_answered(db: Database) -> None:
    """A crash between "the reply is recorded" and "it was confirmed": the next start sends it again with
    the same random_id, Telegram says duplicate, and the message is answered without a second message."""
    said = new_message(ALICE, ALICE, "are you there?")
    first = await make_harness(db)
    await first.dispatch(said)
    await first.settle()
    await first.gateway.stop(grace_s=1)
    # The turn recorded its reply and was cut before anything confirmed it (what a kill -9 leaves behind).
    message_id = said.message.id
    await db.write(lambda c: life.move(c, ALICE.id, [message_id], life.STATE_ACCEPTED))
    reply = await MessageDelivery(db, ALICE.id, message_ids=(message_id,)).sending("yes, here", None)

    second = await make_harness(db)
    second.client.history = [
        types.Message(id=777, peer_id=types.PeerUser(ALICE.id), date=datetime.now(UTC), message="yes, here", out=True)
    ]
    second.client.fail_when = lambda r: (
        errors.RandomIdDuplicateError(request=r) if isinstance(r, functions.messages.SendMessageRequest) else None
    )
    report = await second.gateway.pipeline.recover(1800, second.gateway.me)
    await second.settle()
    try:
        assert report["resent"] == 1 and report["sent_before"] == 1
        assert [r.random_id for r in second.client.sent()] == [reply.once.random_base]
        state = await db.fetchone("select agent_state from tg_messages where chat_id = ? and message_id = ?",
                                  (ALICE.id, message_id))  # fmt: skip
        assert state[0] == life.STATE_ANSWERED
        ours = await db.fetchall("select message_id, text from tg_messages where is_outgoing = 1")
        assert [tuple(r) for r in ours] == [(777, "yes, here")]  # the message Telegram holds, archived once
        assert second.agent.seen == []  # answered by the resend, not asked again
        assert await db.fetchall("select * from reply_sends") == []
    finally:
        await second.gateway.stop(grace_s=1)


async def test_a_mention_by_entity_survives_a_restart(db: Database) -> None:
    """No @username in the text: only Telegram's entity says the message is to us. Cut before the gate's
    verdict was written, the message is judged again at the next start, and is still addressed."""
    mention = types.MessageEntityMentionName(offset=0, length=4, user_id=ME.id)
    said = new_message(GROUP, ALICE, "Tele, what time is it?", entities=[mention], mentioned=True, extra=(GROUP,))
    first = await make_harness(db)
    await first.dispatch(said)
    await first.settle()
    await first.gateway.stop(grace_s=1)
    [row] = await db.fetchall("select message_id, mentions_us from tg_messages where chat_id = ?", (-GROUP.id,))
    assert row["mentions_us"] == 1
    await db.write(lambda c: c.execute("update tg_messages set agent_state = 'archived' where chat_id = ?",
                                       (-GROUP.id,)))  # fmt: skip

    second = await make_harness(db)
    try:
        report = await second.gateway.pipeline.recover(1800, second.gateway.me)
        await second.settle()
        assert report["offered"] == 1
        assert [m.text for m in second.agent.seen] == ["Tele, what time is it?"]
    finally:
        await second.gateway.stop(grace_s=1)
