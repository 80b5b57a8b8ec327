"""Reactions, as people give them: archived (who, which, when; taken back too), a thumbs-down or a "wrong"
reply to an answer becomes a correction candidate shown to that chat's later turns and nowhere else, and
the owner's /status counts the week's reactions to answers. Real Telethon TL updates through an unconnected
client, the real agent, the real ``openai`` SDK against the scripted server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from telethon import utils
from telethon.tl import types

from teleton.agent.prompt.memory import JUDGED_HEADER
from teleton.storage import Database
from teleton.telegram import convert
from tests.agent.conftest import MAIN_MODEL
from tests.fakes.anthropic_server import text
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.conftest import ADMIN, ALICE, BOB, GROUP, ME, SUPERGROUP, attach, new_message
from tests.telegram.stream_world import World, deliver, make_world

GROUP_ID, SUPER_ID = utils.get_peer_id(GROUP), utils.get_peer_id(SUPERGROUP)


@pytest.fixture
async def world(tmp_path: Path, db: Database, fake_openai: FakeOpenAI) -> AsyncIterator[World]:
    fake_openai.responder = lambda body: text("It is Monday.") if body["model"] == MAIN_MODEL else text("ok")
    async for made in make_world(tmp_path, db, fake_openai):
        yield made


async def our_last(world: World, chat_id: int) -> int:
    row = await world.db.fetchone(
        "select max(message_id) from tg_messages where chat_id = ? and is_outgoing = 1", (chat_id,)
    )
    assert row[0] is not None
    return int(row[0])


def emoji(e: str) -> types.ReactionEmoji:
    return types.ReactionEmoji(emoticon=e)


def reactions_now(chat: Any, msg_id: int, named: list[tuple[Any, str]], counts: dict[str, int] | None = None) -> Any:
    """A user account's view: the message's reactions now, counted, with the recent reactors named."""
    counts = counts or {e: sum(1 for _, x in named if x == e) for _, e in named}
    reactions = types.MessageReactions(
        results=[types.ReactionCount(reaction=emoji(e), count=n) for e, n in counts.items()],
        recent_reactions=[
            types.MessagePeerReaction(peer_id=types.PeerUser(u.id), date=datetime.now(UTC), reaction=emoji(e))
            for u, e in named
        ],
    )
    peer = types.PeerChat(chat.id) if isinstance(chat, types.Chat) else types.PeerChannel(chat.id)
    return attach(types.UpdateMessageReactions(peer=peer, msg_id=msg_id, reactions=reactions), chat)


def bot_reaction(chat: Any, msg_id: int, user: Any, old: list[str], new: list[str]) -> Any:
    """A bot's view: one person's change, the reactions before and after."""
    update = types.UpdateBotMessageReaction(
        peer=types.PeerChat(chat.id), msg_id=msg_id, date=datetime.now(UTC), actor=types.PeerUser(user.id),
        old_reactions=[emoji(e) for e in old], new_reactions=[emoji(e) for e in new], qts=1,
    )  # fmt: skip
    return attach(update, chat, user)


async def reactions_of(world: World, chat_id: int, msg_id: int) -> list[tuple[int, str, bool]]:
    rows = await world.db.fetchall(
        "select user_id, emoji, removed_at is not null from tg_reactions where chat_id = ? and message_id = ? "
        "order by user_id, emoji",
        (chat_id, msg_id),
    )
    return [(int(r[0]), str(r[1]), bool(r[2])) for r in rows]


def last_request(world: World) -> str:
    """What the model was shown in the last turn, but the system prompt (which explains the blocks)."""
    messages = [b for b in world.fake.requests if b["model"] == MAIN_MODEL][-1]["messages"]
    return str([m for m in messages if m["role"] != "system"])


async def test_reactions_are_archived_and_taken_back(world: World) -> None:
    talk = new_message(GROUP, ALICE, "lovely weather today")
    await deliver(world, talk)
    msg_id = talk.message.id
    await deliver(world, reactions_now(GROUP, msg_id, [(BOB, "👍"), (ADMIN, "❤")]))
    assert await reactions_of(world, GROUP_ID, msg_id) == [(BOB.id, "👍", False), (ADMIN.id, "❤", False)]
    # Bob takes his back: the counts list only Ada's now, and every reactor is named (complete).
    await deliver(world, reactions_now(GROUP, msg_id, [(ADMIN, "❤")]))
    assert await reactions_of(world, GROUP_ID, msg_id) == [(BOB.id, "👍", True), (ADMIN.id, "❤", False)]
    # A big group names only some reactors: one not named is not taken back while its reaction still counts.
    await deliver(world, reactions_now(GROUP, msg_id, [(BOB, "🔥")], counts={"🔥": 1, "❤": 5}))
    assert (ADMIN.id, "❤", False) in await reactions_of(world, GROUP_ID, msg_id)
    # A bot is told each person's change: before and after.
    await deliver(world, bot_reaction(GROUP, msg_id, BOB, ["🔥"], ["🎉"]))
    assert await reactions_of(world, GROUP_ID, msg_id) == [
        (BOB.id, "🎉", False), (BOB.id, "👍", True), (BOB.id, "🔥", True), (ADMIN.id, "❤", False),
    ]  # fmt: skip


async def test_a_thumbs_down_becomes_a_correction_candidate_of_that_chat_only(world: World) -> None:
    await deliver(world, new_message(GROUP, ALICE, "@teleton_bot what day is it?"))
    answer = await our_last(world, GROUP_ID)
    await deliver(world, reactions_now(GROUP, answer, [(ALICE, "👎")]))
    row = await world.db.fetchone("select user_id, signal from feedback where chat_id = ? and answer_id = ?",
                                  (GROUP_ID, answer))  # fmt: skip
    assert tuple(row) == (ALICE.id, "👎")

    await deliver(world, new_message(GROUP, BOB, "@teleton_bot is the shop open today?"))
    shown = last_request(world)
    assert JUDGED_HEADER in shown and "Alice reacted 👎" in shown
    assert "what day is it?" in shown and "It is Monday." in shown  # the exchange that was judged

    await deliver(world, new_message(SUPERGROUP, ALICE, "@teleton_bot is the shop open today?"))
    assert JUDGED_HEADER not in last_request(world) and "reacted 👎" not in last_request(world)  # another chat
    await deliver(world, new_message(ADMIN, ADMIN, "is the shop open today?"))
    assert JUDGED_HEADER not in last_request(world)  # not even the owner's DM: it is the group's


async def test_a_reply_saying_wrong_is_a_candidate_with_its_words_and_a_thumbs_up_is_not(world: World) -> None:
    await deliver(world, new_message(GROUP, ALICE, "@teleton_bot what day is it?"))
    answer = await our_last(world, GROUP_ID)
    await deliver(world, reactions_now(GROUP, answer, [(BOB, "👍")]))
    assert (await world.db.fetchone("select count(*) from feedback"))[0] == 0
    await deliver(world, new_message(GROUP, ALICE, "wrong, it is Tuesday", reply_to=answer))
    await deliver(world, new_message(GROUP, BOB, "@teleton_bot so what day is it?"))
    assert 'Alice replied "wrong, it is Tuesday"' in last_request(world)
    # Deleting the judged answer takes its candidate with it (it named the messages, it copied no words).
    await world.gateway.pipeline.delete(None, [answer])
    await deliver(world, new_message(GROUP, BOB, "@teleton_bot and tomorrow?"))
    assert JUDGED_HEADER not in last_request(world)


async def test_the_owners_status_counts_the_weeks_reactions_to_answers(world: World) -> None:
    await deliver(world, new_message(GROUP, ALICE, "@teleton_bot what day is it?"))
    answer = await our_last(world, GROUP_ID)
    talk = new_message(GROUP, ALICE, "not an answer of ours")
    await deliver(world, talk)
    await deliver(world, reactions_now(GROUP, answer, [(ALICE, "👎"), (BOB, "👍"), (ADMIN, "👍")]))
    await deliver(world, reactions_now(GROUP, talk.message.id, [(BOB, "🔥")]))  # not on an answer: not counted
    await deliver(world, new_message(ADMIN, ADMIN, "/status"))
    status = [r for r in world.client.sent() if utils.get_peer_id(r.peer) == ADMIN.id][-1].message
    assert "Reactions to answers this week: 👍 2, 👎 1" in status


def test_in_a_private_chat_the_counts_say_who_reacted() -> None:
    counts = [
        types.ReactionCount(reaction=emoji("👍"), count=1),  # theirs
        types.ReactionCount(reaction=emoji("❤"), count=2, chosen_order=0),  # theirs and ours
    ]
    update = types.UpdateMessageReactions(
        peer=types.PeerUser(ALICE.id), msg_id=7, reactions=types.MessageReactions(results=counts)
    )
    change = convert.reaction_change(update, ME.id, now=5.0)
    assert change is not None and change.settled is None  # every reactor is known: the rest were taken back
    assert sorted((r.user_id, r.emoji) for r in change.present) == [(ME.id, "❤"), (ALICE.id, "❤"), (ALICE.id, "👍")]
    custom = types.UpdateBotMessageReaction(
        peer=types.PeerUser(ALICE.id), msg_id=7, date=datetime.now(UTC), actor=types.PeerUser(ALICE.id),
        old_reactions=[], new_reactions=[types.ReactionCustomEmoji(document_id=42), types.ReactionPaid()], qts=1,
    )  # fmt: skip
    change = convert.reaction_change(custom, ME.id, now=5.0)
    assert change is not None and [r.emoji for r in change.present] == ["custom:42", "paid"]
    assert change.settled == frozenset({ALICE.id})
