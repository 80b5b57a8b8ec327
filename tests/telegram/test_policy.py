"""The gate, through real updates: who gets an answer under each policy, and what counts as addressing us."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from telethon import utils
from telethon.tl import types

from teleton.storage import Database
from teleton.telegram.receive.dispatch import DebounceConfig
from tests.telegram.conftest import (
    ADMIN,
    ALICE,
    BOB,
    GROUP,
    ME,
    OTHER_BOT,
    SUPERGROUP,
    GatewayHarness,
    make_harness,
    new_message,
)

GROUP_ID = utils.get_peer_id(GROUP)


async def answered(h: GatewayHarness, *updates: Any) -> list[str]:
    await h.dispatch(*updates)
    await h.settle()
    return [m.text for m in h.agent.seen]


@pytest.mark.parametrize(
    ("dm_policy", "expected"),
    [
        ("open", {"alice", "bob", "admin"}),
        ("allowlist", {"alice", "admin"}),  # allow_from lists alice by username; admins always pass
        ("admin-only", {"admin"}),
        ("disabled", set()),
    ],
)
async def test_dm_policy(db: Database, dm_policy: str, expected: set[str]) -> None:
    h = await make_harness(db, dm_policy=dm_policy, allow_from=["@Alice"])
    try:
        got = await answered(
            h, new_message(ALICE, ALICE, "alice"), new_message(BOB, BOB, "bob"), new_message(ADMIN, ADMIN, "admin")
        )
        assert set(got) == expected
        assert len(await h.rows()) == 3  # the policy never stops archiving
    finally:
        await h.gateway.stop(grace_s=1)


async def test_allow_from_by_numeric_id(db: Database) -> None:
    h = await make_harness(db, dm_policy="allowlist", allow_from=[BOB.id])
    try:
        assert await answered(h, new_message(ALICE, ALICE, "alice"), new_message(BOB, BOB, "bob")) == ["bob"]
    finally:
        await h.gateway.stop(grace_s=1)


@pytest.mark.parametrize(
    ("group_policy", "expected"),
    [
        ("open", {"book club: alice", "big group: alice", "book club: admin"}),
        ("allowlist", {"book club: alice", "book club: admin"}),  # only the listed group
        ("admin-only", {"book club: admin"}),
        ("disabled", set()),
    ],
)
async def test_group_policy(db: Database, group_policy: str, expected: set[str]) -> None:
    h = await make_harness(db, group_policy=group_policy, group_allow_from=[GROUP_ID])
    try:
        got = await answered(
            h,
            new_message(GROUP, ALICE, "@teleton_bot book club: alice", extra=(GROUP,)),
            new_message(SUPERGROUP, ALICE, "@teleton_bot big group: alice", extra=(SUPERGROUP,)),
        )
        got += await answered(h, new_message(GROUP, ADMIN, "@teleton_bot book club: admin", extra=(GROUP,)))
        assert {t.removeprefix("@teleton_bot ") for t in got} == expected
    finally:
        await h.gateway.stop(grace_s=1)


def _mention_entity(text: str, word: str, cls: Any = types.MessageEntityMention, **kw: Any) -> list[Any]:
    return [cls(offset=text.index(word), length=len(word), **kw)]


MENTION_FORMS = {
    "username in text": lambda: new_message(GROUP, ALICE, "hey @TELETON_bot, thoughts?", extra=(GROUP,)),
    "mention entity": lambda: new_message(
        GROUP,
        ALICE,
        "ping @teleton_bot",
        extra=(GROUP,),
        entities=_mention_entity("ping @teleton_bot", "@teleton_bot"),
    ),
    "mention-name entity": lambda: new_message(
        GROUP,
        ALICE,
        "ping Tele",
        extra=(GROUP,),
        entities=_mention_entity("ping Tele", "Tele", types.MessageEntityMentionName, user_id=ME.id),
    ),
    "mention after emoji (utf-16 offsets)": lambda: new_message(
        GROUP,
        ALICE,
        "🎉🎉 @teleton_bot",
        extra=(GROUP,),
        entities=[types.MessageEntityMention(offset=5, length=12)],
    ),
    "bot command": lambda: new_message(GROUP, ALICE, "/help@teleton_bot", extra=(GROUP,)),
}


@pytest.mark.parametrize("form", list(MENTION_FORMS))
async def test_mention_forms_address_us(harness: GatewayHarness, form: str) -> None:
    update = MENTION_FORMS[form]()
    await harness.dispatch(update)
    await harness.settle()
    assert [m.mentions_us for m in harness.agent.seen] == [True]


@pytest.mark.parametrize(
    "text",
    ["email me at x@teleton_bot.com... no", "@teleton_bot_fan said hi", "teleton_bot is a name", "plain talk"],
)
async def test_lookalikes_do_not_address_us(harness: GatewayHarness, text: str) -> None:
    await harness.dispatch(new_message(GROUP, ALICE, text, extra=(GROUP,)))
    await harness.settle()
    assert harness.agent.seen == []
    assert [m.text for m in harness.gateway.dispatcher.pending_context(GROUP_ID)] == [text]


async def test_mention_of_someone_else_does_not_address_us(harness: GatewayHarness) -> None:
    text = "ask Bob"
    await harness.dispatch(
        new_message(
            GROUP,
            ALICE,
            text,
            extra=(GROUP,),
            entities=_mention_entity(text, "Bob", types.MessageEntityMentionName, user_id=BOB.id),
        )
    )
    await harness.settle()
    assert harness.agent.seen == []


async def test_reply_to_our_message_addresses_us(harness: GatewayHarness) -> None:
    harness.client.session.process_entities(
        types.contacts.ResolvedPeer(peer=types.PeerChat(GROUP.id), chats=[GROUP], users=[])
    )
    sent = await harness.gateway.send_message(GROUP_ID, "I think it's great")
    await harness.dispatch(new_message(GROUP, ALICE, "why?", reply_to=sent.message_id, extra=(GROUP,)))
    await harness.dispatch(new_message(GROUP, BOB, "reply to alice", reply_to=1, extra=(GROUP,)))
    await harness.settle()
    assert [(m.text, m.reply_to_us) for m in harness.agent.seen] == [("why?", True)]


async def test_reply_to_us_known_only_from_archive_after_restart(db: Database) -> None:
    first = await make_harness(db)
    ours = new_message(GROUP, ME, "archived answer", out=True, extra=(GROUP,))
    await first.dispatch(ours)
    await first.gateway.stop(grace_s=1)
    second = await make_harness(db)  # fresh process: no in-memory memory of what we sent
    try:
        got = await answered(second, new_message(GROUP, ALICE, "thanks!", reply_to=ours.message.id, extra=(GROUP,)))
        assert got == ["thanks!"]
    finally:
        await second.gateway.stop(grace_s=1)


async def test_require_mention_off_answers_every_group_message(db: Database) -> None:
    h = await make_harness(db, require_mention=False)
    try:
        assert await answered(h, new_message(GROUP, ALICE, "no mention here", extra=(GROUP,))) == ["no mention here"]
    finally:
        await h.gateway.stop(grace_s=1)


async def test_other_bots_and_our_own_messages_are_ignored(harness: GatewayHarness) -> None:
    got = await answered(
        harness,
        new_message(OTHER_BOT, OTHER_BOT, "I am a bot"),
        new_message(GROUP, OTHER_BOT, "@teleton_bot bot talking", extra=(GROUP,)),
        new_message(GROUP, ME, "@teleton_bot talking to myself", out=True, extra=(GROUP,)),
    )
    assert got == []
    assert len(await harness.rows()) == 3


async def test_per_chat_rate_limit_spares_other_chats_and_admins(db: Database) -> None:
    h = await make_harness(db, rate_limit_per_chat=2, rate_limit_global=100)
    try:
        got = await answered(
            h,
            *[new_message(ALICE, ALICE, f"a{i}") for i in range(4)],
            new_message(BOB, BOB, "b0"),
            *[new_message(ADMIN, ADMIN, f"admin{i}") for i in range(4)],
        )
        assert sorted(got) == ["a0", "a1", "admin0", "admin1", "admin2", "admin3", "b0"]  # chats run in parallel
        assert len(await h.rows()) == 9
    finally:
        await h.gateway.stop(grace_s=1)


async def test_global_rate_limit(db: Database) -> None:
    h = await make_harness(db, rate_limit_per_chat=10, rate_limit_global=3)
    try:
        got = await answered(h, *[new_message(u, u, u.first_name) for u in (ALICE, BOB, ALICE, BOB)])
        assert len(got) == 3
    finally:
        await h.gateway.stop(grace_s=1)


async def test_group_burst_is_debounced_into_one_turn(harness: GatewayHarness) -> None:
    # A window no busy machine outlasts; the turn goes as soon as the two addressed messages are in (the cap in
    # messages), so nothing here depends on how fast the updates arrive.
    assert harness.gateway.dispatcher is not None
    harness.gateway.dispatcher.debounce = DebounceConfig(window_s=300, max_factor=1, max_messages=2)
    await harness.dispatch(
        new_message(GROUP, ALICE, "@teleton_bot first", extra=(GROUP,)),
        new_message(GROUP, BOB, "side remark", extra=(GROUP,)),
        new_message(GROUP, ALICE, "@teleton_bot second", extra=(GROUP,)),
    )
    await harness.settle()
    [turn] = harness.agent.seen
    assert turn.text == "@teleton_bot second"
    assert [m.text for m in turn.earlier_context] == ["@teleton_bot first", "side remark"]


async def test_dm_turns_are_serial_per_chat_and_parallel_across_chats(harness: GatewayHarness) -> None:
    assert harness.gateway.dispatcher is not None
    agent = harness.gateway.dispatcher.handler
    events: list[tuple[str, str]] = []
    bob_started = asyncio.Event()

    async def recording_agent(msg: Any) -> None:
        events.append(("start", msg.text))
        if msg.text == "b1":
            bob_started.set()
        if msg.text == "a1":  # Alice's first turn lasts until Bob's turn has begun (a hang guard only)
            await asyncio.wait_for(bob_started.wait(), timeout=60)
        await agent(msg)
        events.append(("end", msg.text))

    harness.gateway.dispatcher.handler = recording_agent
    await harness.dispatch(
        new_message(ALICE, ALICE, "a1"), new_message(ALICE, ALICE, "a2"), new_message(BOB, BOB, "b1")
    )
    await harness.settle()
    assert sorted(m.text for m in harness.agent.seen) == ["a1", "a2", "b1"]
    assert events.index(("start", "b1")) < events.index(("end", "a1"))  # bob's turn alongside alice's
    assert events.index(("end", "a1")) < events.index(("start", "a2"))  # alice's two turns in a row


async def test_short_update_sender_is_recognised_from_the_archive(db: Database) -> None:
    """UpdateShortMessage carries no user object: the allowlist by @username still works."""
    from datetime import UTC, datetime

    h = await make_harness(db, dm_policy="allowlist", allow_from=["alice", OTHER_BOT.id])
    try:
        await answered(h, new_message(ALICE, ALICE, "first, with full user"))
        short = types.UpdateShortMessage(
            id=9001, user_id=ALICE.id, message="short one", pts=1, pts_count=1, date=datetime.now(UTC)
        )
        short._entities = {}
        short_bot = types.UpdateShortMessage(
            id=9002, user_id=OTHER_BOT.id, message="beep", pts=1, pts_count=1, date=datetime.now(UTC)
        )
        short_bot._entities = {}
        await answered(h, new_message(OTHER_BOT, OTHER_BOT, "bot seen once"))
        got = await answered(h, short, short_bot)
        assert got == ["first, with full user", "short one"]
    finally:
        await h.gateway.stop(grace_s=1)
