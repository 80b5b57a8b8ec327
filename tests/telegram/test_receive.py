"""Updates in: what gets archived, what reaches the agent, and in which form."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from telethon import utils
from telethon.tl import types

from teleton.gateway.contract import MediaInfo
from tests.telegram.conftest import (
    ADMIN,
    ALICE,
    BOB,
    CHANNEL,
    GROUP,
    ME,
    SUPERGROUP,
    GatewayHarness,
    attach,
    new_message,
    next_id,
)
from tests.waiting import until

GROUP_ID = utils.get_peer_id(GROUP)
SUPER_ID = utils.get_peer_id(SUPERGROUP)
CHANNEL_ID = utils.get_peer_id(CHANNEL)


async def test_dm_is_archived_before_the_agent_sees_it(harness: GatewayHarness) -> None:
    await harness.dispatch(new_message(ALICE, ALICE, "hello there"))
    await harness.settle()

    [msg] = harness.agent.seen
    assert harness.agent.archived_first == [True]
    assert (msg.chat.type, msg.chat.id, msg.text) == ("dm", ALICE.id, "hello there")
    assert msg.sender is not None and msg.sender.username == "alice"
    [row] = await harness.rows()
    assert (row["chat_id"], row["sender_name"], row["text"]) == (ALICE.id, "Alice", "hello there")
    chat = await harness.db.fetchone("select type, title, username from tg_chats where id = ?", (ALICE.id,))
    assert tuple(chat) == ("dm", "Alice", "alice")


async def test_group_message_without_mention_is_archived_and_kept_as_context(harness: GatewayHarness) -> None:
    await harness.dispatch(
        new_message(GROUP, ALICE, "anyone read Dune?", extra=(GROUP,)),
        new_message(GROUP, BOB, "yes, twice", extra=(GROUP,)),
    )
    await harness.settle()
    assert harness.agent.seen == []
    assert len(await harness.rows(GROUP_ID)) == 2

    await harness.dispatch(new_message(GROUP, ALICE, "@teleton_bot what do you think?", extra=(GROUP,)))
    await harness.settle()
    [msg] = harness.agent.seen
    assert msg.chat.type == "group" and msg.mentions_us
    assert [m.text for m in msg.earlier_context] == ["anyone read Dune?", "yes, twice"]
    # Handed over once: the next mention does not repeat old context.
    await harness.dispatch(new_message(GROUP, BOB, "@teleton_bot and you?", extra=(GROUP,)))
    await harness.settle()
    assert harness.agent.seen[-1].earlier_context == ()


async def test_broadcast_channel_posts_are_archived_never_answered(harness: GatewayHarness) -> None:
    await harness.dispatch(new_message(CHANNEL, None, "Breaking: @teleton_bot", post=True, extra=(CHANNEL,)))
    await harness.settle()
    assert harness.agent.seen == []
    [row] = await harness.rows(CHANNEL_ID)
    assert row["text"] == "Breaking: @teleton_bot" and row["sender_id"] == CHANNEL_ID
    chat = await harness.db.fetchone("select type, title from tg_chats where id = ?", (CHANNEL_ID,))
    assert tuple(chat) == ("channel", "News")


async def test_supergroup_is_a_group(harness: GatewayHarness) -> None:
    await harness.dispatch(new_message(SUPERGROUP, BOB, "hey @Teleton_Bot!", extra=(SUPERGROUP,)))
    await harness.settle()
    [msg] = harness.agent.seen
    assert (msg.chat.type, msg.chat.id, msg.chat.title) == ("group", SUPER_ID, "Big group")


async def test_replayed_update_is_archived_once_and_answered_once(harness: GatewayHarness) -> None:
    update = new_message(ALICE, ALICE, "only once please")
    await harness.dispatch(update, update)
    await harness.settle()
    await harness.dispatch(update)  # e.g. a catch-up after restart delivering it again
    await harness.settle()
    assert len(await harness.rows()) == 1
    assert len(harness.agent.seen) == 1


async def test_edit_keeps_latest_text_then_delete_marks_it(harness: GatewayHarness) -> None:
    update = new_message(ALICE, ALICE, "meet at 5pm")
    mid = update.message.id
    await harness.dispatch(update)
    edited = types.Message(
        id=mid,
        peer_id=types.PeerUser(ALICE.id),
        from_id=types.PeerUser(ALICE.id),
        date=update.message.date,
        message="meet at 6pm",
        edit_date=datetime.now(UTC),
    )
    await harness.dispatch(attach(types.UpdateEditMessage(message=edited, pts=2, pts_count=1), ALICE))
    await harness.settle()
    [row] = await harness.rows()
    assert (row["text"], row["edited"], row["deleted"]) == ("meet at 6pm", 1, 0)
    hits = await harness.db.fetchall("select rowid from tg_messages_fts where tg_messages_fts match '6pm'")
    old = await harness.db.fetchall("select rowid from tg_messages_fts where tg_messages_fts match '5pm'")
    assert len(hits) == 1 and old == []

    await harness.dispatch(attach(types.UpdateDeleteMessages(messages=[mid], pts=3, pts_count=1)))
    await harness.settle()
    [row] = await harness.rows()
    assert (row["text"], row["deleted"]) == ("meet at 6pm", 1)  # marked, not erased
    assert len(harness.agent.seen) == 1  # the edit was not a new turn


async def test_channel_deletion_marks_only_that_channel(harness: GatewayHarness) -> None:
    post = new_message(CHANNEL, None, "post", post=True, extra=(CHANNEL,))
    dm = new_message(ALICE, ALICE, "dm", msg_id=post.message.id)
    await harness.dispatch(post, dm)
    await harness.dispatch(
        attach(types.UpdateDeleteChannelMessages(channel_id=CHANNEL.id, messages=[post.message.id], pts=2, pts_count=1))
    )
    await harness.settle()
    deleted = {r["chat_id"]: r["deleted"] for r in await harness.rows()}
    assert deleted == {CHANNEL_ID: 1, ALICE.id: 0}


async def test_media_reply_and_forward_are_recorded(harness: GatewayHarness) -> None:
    photo = types.MessageMediaPhoto(photo=types.PhotoEmpty(id=1))
    voice = types.MessageMediaDocument(
        document=types.Document(
            id=2,
            access_hash=0,
            file_reference=b"",
            date=datetime.now(UTC),
            mime_type="audio/ogg",
            size=10,
            dc_id=1,
            attributes=[types.DocumentAttributeAudio(duration=3, voice=True)],
        )
    )
    fwd = types.MessageFwdHeader(date=datetime.now(UTC), from_name="Hidden Person")
    first = new_message(GROUP, ALICE, "look at this", media=photo, extra=(GROUP,))
    await harness.dispatch(
        first,
        new_message(GROUP, BOB, "", media=voice, reply_to=first.message.id, extra=(GROUP,)),
        new_message(GROUP, BOB, "fwd text", fwd_from=fwd, extra=(GROUP,)),
    )
    await harness.settle()
    rows = await harness.rows(GROUP_ID)
    assert [(r["media_kind"], r["reply_to_id"], r["fwd_from"]) for r in rows] == [
        ("photo", None, None),
        ("voice", first.message.id, None),
        (None, None, "Hidden Person"),
    ]
    assert rows[0]["text"] == "look at this"  # the caption


async def test_a_voice_note_and_a_photo_reach_the_agent_with_their_declared_size(harness: GatewayHarness) -> None:
    # What the size caps are checked against before any download: Telegram's own declaration.
    voice = types.MessageMediaDocument(
        document=types.Document(
            id=3, access_hash=0, file_reference=b"", date=datetime.now(UTC), mime_type="audio/ogg",
            size=3 * 1024**3, dc_id=1, attributes=[types.DocumentAttributeAudio(duration=12, voice=True)],
        )
    )  # fmt: skip
    sizes = [types.PhotoSize(type="m", w=320, h=240, size=9_000), types.PhotoSize(type="y", w=1280, h=960, size=81_000)]
    photo = types.MessageMediaPhoto(
        photo=types.Photo(id=4, access_hash=0, file_reference=b"", date=datetime.now(UTC), sizes=sizes, dc_id=1)
    )
    location = types.MessageMediaGeo(geo=types.GeoPointEmpty())
    await harness.dispatch(
        new_message(ALICE, ALICE, "", media=voice),
        new_message(BOB, BOB, "the receipt", media=photo),
        new_message(ADMIN, ADMIN, "here", media=location),
    )
    await until(lambda: len(harness.agent.seen) == 3)
    voice_msg, photo_msg, geo_msg = sorted(harness.agent.seen, key=lambda m: m.message_id)
    assert voice_msg.media == MediaInfo(kind="voice", size=3 * 1024**3, mime_type="audio/ogg", duration_s=12.0)
    assert photo_msg.media == MediaInfo(kind="photo", size=81_000, mime_type="image/jpeg")  # the largest size
    assert geo_msg.media is None and geo_msg.media_kind == "location"  # nothing to read: archived as a kind


async def test_outgoing_messages_from_another_device_are_archived_not_answered(harness: GatewayHarness) -> None:
    await harness.dispatch(new_message(ALICE, ME, "sent from my phone", out=True))
    await harness.settle()
    [row] = await harness.rows()
    assert (row["is_outgoing"], row["sender_id"]) == (1, ME.id)
    assert harness.agent.seen == []


async def test_service_messages_update_chat_metadata(harness: GatewayHarness) -> None:
    await harness.dispatch(new_message(GROUP, ALICE, "hi", extra=(GROUP,)))
    title = types.MessageService(
        id=next_id(),
        peer_id=types.PeerChat(GROUP.id),
        from_id=types.PeerUser(ALICE.id),
        date=datetime.now(UTC),
        action=types.MessageActionChatEditTitle(title="Sci-fi club"),
    )
    join = types.MessageService(
        id=next_id(),
        peer_id=types.PeerChat(GROUP.id),
        from_id=types.PeerUser(BOB.id),
        date=datetime.now(UTC),
        action=types.MessageActionChatAddUser(users=[BOB.id]),
    )
    leave = types.MessageService(
        id=next_id(),
        peer_id=types.PeerChat(GROUP.id),
        from_id=types.PeerUser(ALICE.id),
        date=datetime.now(UTC),
        action=types.MessageActionChatDeleteUser(user_id=ALICE.id),
    )
    for service in (title, join, leave):
        await harness.dispatch(attach(types.UpdateNewMessage(message=service, pts=1, pts_count=1), ALICE, BOB))
    await harness.settle()
    chat = await harness.db.fetchone("select title, member_count from tg_chats where id = ?", (GROUP_ID,))
    assert tuple(chat) == ("Sci-fi club", 5)  # 5 + 1 joined - 1 left
    texts = [r["text"] for r in await harness.rows(GROUP_ID) if r["is_service"]]
    assert texts == ["Alice changed the title to “Sci-fi club”", "Bob joined", "Alice left"]
    assert harness.agent.seen == []


async def test_user_metadata_phone_only_when_visible(harness: GatewayHarness) -> None:
    await harness.dispatch(new_message(ALICE, ALICE, "a"), new_message(BOB, BOB, "b"))
    await harness.settle()
    users = {
        r["id"]: tuple(r)
        for r in await harness.db.fetchall("select id, first_name, username, phone, is_bot from tg_users")
    }
    assert users[ALICE.id] == (ALICE.id, "Alice", "alice", "15550001", 0)
    assert users[BOB.id] == (BOB.id, "Bob", "bobby", None, 0)
    # Alice hides her number: the archive forgets it too.
    hidden = types.User(id=ALICE.id, first_name="Alice", username="alice", access_hash=21)
    await harness.dispatch(new_message(ALICE, hidden, "c"))
    await harness.settle()
    row = await harness.db.fetchone("select phone from tg_users where id = ?", (ALICE.id,))
    assert row["phone"] is None


async def test_hostile_and_huge_text_is_archived_intact(harness: GatewayHarness) -> None:
    hostile = "'; drop table tg_messages; -- \" NEAR * AND ** __ ` ```" + "\u202e" + "💥" * 10
    huge = "x" * 10_000_000
    await harness.dispatch(new_message(ALICE, ALICE, hostile), new_message(BOB, BOB, huge))
    await harness.settle()
    rows = await harness.rows()
    assert [r["text"] for r in rows] == [hostile, huge]
    assert len(harness.agent.seen) == 2


async def test_group_media_the_agent_was_not_asked_about_goes_to_describe_all(harness: GatewayHarness) -> None:
    unaddressed: list[Any] = []
    harness.gateway.pipeline.on_unaddressed_media = unaddressed.append
    photo = types.MessageMediaPhoto(
        photo=types.Photo(
            id=5, access_hash=0, file_reference=b"", date=datetime.now(UTC), dc_id=1,
            sizes=[types.PhotoSize(type="y", w=1280, h=960, size=50_000)],
        )
    )  # fmt: skip
    quiet = new_message(GROUP, ALICE, "our whiteboard", media=photo, extra=(GROUP,))
    asked = new_message(GROUP, BOB, "what does it say?", media=photo, mentioned=True, extra=(GROUP,))
    chatter = new_message(GROUP, BOB, "no media here", extra=(GROUP,))
    await harness.dispatch(quiet, asked, chatter)
    await harness.settle()
    assert [m.message_id for m in unaddressed] == [quiet.message.id]  # the asked one is the agent's turn
    assert [m.message_id for m in harness.agent.seen] == [asked.message.id]
