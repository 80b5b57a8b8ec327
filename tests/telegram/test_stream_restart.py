"""A streamed answer and a restart (what a kill -9 leaves in the database): the user ends with one full answer.

Each test runs the first start up to a kill point with the real code (the gateway, the streamed reply, the
delivery records), stops it there, and starts again on the same database: the real recovery pass, the real
agent streaming from the scripted OpenAI-compatible server, real Telethon requests. What is asserted is
what the chat received: which messages were sent, which were edited into what, and that nothing owed is
left behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from telethon import errors, functions

from teleton.agent.delivery.records import Delivery, MessageDelivery, NoRecord
from teleton.agent.delivery.streaming import StreamedReply
from teleton.memory.feed import message_life as life
from teleton.storage import Database, connect, schema
from teleton.storage.sqlite_driver import pick_driver
from tests.fakes.anthropic_server import text
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.conftest import ADMIN, ME, make_harness, new_message
from tests.telegram.stream_world import ANSWER, World, answered, assert_settled, make_world

FIRST_WORDS = "Once upon a time, in a land far away"  # what the first start had shown when it died
LONG = "\n\n".join(f"Part {i}: " + " ".join(["word"] * 700) for i in range(3))  # three messages
SENT, EDITED = functions.messages.SendMessageRequest, functions.messages.EditMessageRequest


@pytest.fixture
def fake_api() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.pace_s = 0.001
        yield server


async def cut_while_streaming(db: Database, *, recorded: bool = True) -> tuple[int, int]:
    """The owner's DM accepted, its answer streaming (first words shown), then the process died: the asked
    message and the streamed one. ``recorded`` False: died after the send, before its id was written."""
    said = new_message(ADMIN, ADMIN, "tell me a long story")
    first = await make_harness(db)
    await first.dispatch(said)
    await first.settle()
    asked = said.message.id
    await db.write(lambda c: life.move(c, ADMIN.id, [asked], life.STATE_ACCEPTED))
    delivery: Delivery = MessageDelivery(db, ADMIN.id, message_ids=(asked,)) if recorded else NoRecord()
    stream = StreamedReply(first.gateway, delivery, ADMIN.id)
    stream.piece(FIRST_WORDS)
    await stream.settle()
    assert stream.message_id and first.client.sent()[-1].message == FIRST_WORDS
    await first.gateway.stop(grace_s=1)
    return asked, stream.message_id


async def cut_after_recording_the_reply(db: Database, parts_confirmed: int) -> tuple[int, int, int]:
    """As above, then the answer was complete and its reply recorded (naming the streamed message), and the
    process died with ``parts_confirmed`` of its three parts confirmed: (asked, streamed, random_base)."""
    asked, shown = await cut_while_streaming(db)
    sending = await MessageDelivery(db, ADMIN.id, message_ids=(asked,)).sending(LONG, edits=shown)
    assert sending.once.confirm is not None and sending.once.edits == shown
    for n in range(1, parts_confirmed + 1):
        await sending.once.confirm(n)
    return asked, shown, sending.once.random_base


async def next_start(world: World) -> dict[str, int]:
    report = await world.gateway.pipeline.recover(1800, ME)
    await world.gateway.batcher.drain()
    assert world.gateway.dispatcher is not None
    await world.gateway.dispatcher.idle()
    return report


async def state(db: Database, message_id: int) -> str:
    row = await db.fetchone(
        "select agent_state from tg_messages where chat_id = ? and message_id = ?", (ADMIN.id, message_id)
    )
    return str(row[0])


async def nothing_owed(db: Database) -> None:
    assert await db.fetchall("select * from reply_sends") == []
    assert await db.fetchall("select * from reply_streams") == []


async def test_killed_mid_stream_the_new_answer_is_edited_into_the_streamed_message(
    tmp_path: Path, db: Database, fake_api: FakeOpenAI
) -> None:
    asked, shown = await cut_while_streaming(db)
    assert (await state(db, asked)) == life.STATE_ACCEPTED  # still owed its answer, not failed
    async for world in make_world(tmp_path, db, fake_api, first_id=20_000):
        answered(world.fake, text(ANSWER))
        report = await next_start(world)
        assert report["offered"] == 1  # answered again, as any message a restart cut
        assert world.to_owner(SENT) == []  # no second message beside the half answer
        edits = world.to_owner(EDITED)
        assert {e.id for e in edits} == {shown} and len(edits) >= 2  # it streams on in the same message
        assert edits[-1].message == ANSWER
        archived = await db.fetchall(
            "select message_id, text from tg_messages where chat_id = ? and is_outgoing = 1", (ADMIN.id,)
        )
        assert [tuple(r) for r in archived] == [(shown, ANSWER)]
        await assert_settled(db)
        await nothing_owed(db)


@pytest.mark.parametrize("edit_landed", [False, True], ids=["edit-lost", "edit-landed"])
async def test_killed_during_the_final_edit_recovery_finishes_it_once(
    tmp_path: Path, db: Database, fake_api: FakeOpenAI, edit_landed: bool
) -> None:
    asked, shown, base = await cut_after_recording_the_reply(db, parts_confirmed=0)
    async for world in make_world(tmp_path, db, fake_api, first_id=20_000):
        if edit_landed:  # Telegram holds the edit already: a repeat is "not modified", which is success
            world.client.fail_when = lambda r: (
                errors.MessageNotModifiedError(request=r) if isinstance(r, EDITED) else None
            )
        report = await next_start(world)
        assert report["resent"] == 1 and world.fake.requests == []  # the model is not asked again
        edits = [r for r in world.client.requests if isinstance(r, EDITED)]
        assert [e.id for e in edits] == [shown] and edits[0].message.startswith("Part 0:")
        sent = world.client.sent()
        assert [(r.random_id, r.message.split(":")[0]) for r in sent] == [(base + 1, "Part 1"), (base + 2, "Part 2")]
        assert (await state(db, asked)) == life.STATE_ANSWERED
        await nothing_owed(db)


async def test_killed_while_the_later_parts_went_out_the_rest_is_sent_once(
    tmp_path: Path, db: Database, fake_api: FakeOpenAI
) -> None:
    asked, _, base = await cut_after_recording_the_reply(db, parts_confirmed=2)
    async for world in make_world(tmp_path, db, fake_api, first_id=20_000):
        report = await next_start(world)
        assert report["resent"] == 1
        assert not [r for r in world.client.requests if isinstance(r, EDITED)]  # part 0 was done
        assert [(r.random_id, r.message.split(":")[0]) for r in world.client.sent()] == [(base + 2, "Part 2")]
        assert (await state(db, asked)) == life.STATE_ANSWERED
        await nothing_owed(db)


async def test_a_streamed_message_the_user_deleted_is_answered_by_a_new_message(
    tmp_path: Path, db: Database, fake_api: FakeOpenAI
) -> None:
    asked, shown = await cut_while_streaming(db)
    async for world in make_world(tmp_path, db, fake_api, first_id=20_000):
        witness = world.client.fail_when
        assert witness is not None

        def deleted(request: Any, witness: Callable[[Any], Any] = witness) -> BaseException | None:
            witness(request)
            if isinstance(request, EDITED) and request.id == shown:
                return errors.MessageIdInvalidError(request=request)
            return None

        world.client.fail_when = deleted
        answered(world.fake, text(ANSWER))
        await next_start(world)
        assert [r.message for r in world.to_owner(SENT)] == [ANSWER]  # the whole answer, once, new
        assert all(e.id == shown for e in world.to_owner(EDITED))  # only the tries on the deleted one
        assert (await state(db, asked)) == life.STATE_ANSWERED
        await nothing_owed(db)


async def test_killed_before_the_streamed_id_was_written_one_new_full_answer(
    tmp_path: Path, db: Database, fake_api: FakeOpenAI
) -> None:
    """The one window left (docs/operations.md, "Streaming"): the first words went out and the process
    died before their message's id was recorded. Nothing knows that message, so it stays as it was, and
    the answer arrives whole in one new message."""
    asked, shown = await cut_while_streaming(db, recorded=False)
    async for world in make_world(tmp_path, db, fake_api, first_id=20_000):
        answered(world.fake, text(ANSWER))
        await next_start(world)
        sends = world.to_owner(SENT)
        assert len(sends) == 1 and ANSWER.startswith(sends[0].message)  # one new message, streamed
        assert world.to_owner(EDITED)[-1].message == ANSWER
        assert not [r for r in world.client.requests if getattr(r, "id", None) in (shown, [shown])]
        assert (await state(db, asked)) == life.STATE_ANSWERED
        await nothing_owed(db)


async def test_a_stop_mid_stream_leaves_nothing_owed(db: Database) -> None:
    """A turn that ends without its reply (/stop) keeps the words shown and owes nothing through them."""
    asked, _ = await cut_while_streaming(db)
    await MessageDelivery(db, ADMIN.id, message_ids=(asked,)).finished(life.STATE_FAILED, "stopped by /stop")
    await nothing_owed(db)


def test_step_7_keeps_the_replies_owed_and_adds_the_streams(tmp_path: Path) -> None:
    conn = connect(tmp_path / "v6.db", pick_driver())
    schema.migrate(conn, schema.MIGRATIONS[:6])
    conn.execute(
        "insert into reply_sends(chat_id, answers, text, random_base, created_at) values (1, '[5]', 'hi', 9, 0)"
    )
    assert schema.migrate(conn, schema.MIGRATIONS[:7]) == (6, 7)
    row = conn.execute("select text, parts_sent, state, edits from reply_sends").fetchone()
    assert tuple(row) == ("hi", 0, "pending", None)
    assert conn.execute("select count(*) from reply_streams").fetchone()[0] == 0
    conn.close()


async def test_with_streaming_turned_off_meanwhile_the_message_still_becomes_the_answer(
    tmp_path: Path, db: Database, fake_api: FakeOpenAI
) -> None:
    asked, shown = await cut_while_streaming(db)
    async for world in make_world(tmp_path, db, fake_api, first_id=20_000, stream_edits=False):
        answered(world.fake, text(ANSWER))
        await next_start(world)
        assert world.to_owner(SENT) == []
        assert [(e.id, e.message) for e in world.to_owner(EDITED)] == [(shown, ANSWER)]  # one edit, no stream
        assert (await state(db, asked)) == life.STATE_ANSWERED
        await nothing_owed(db)
