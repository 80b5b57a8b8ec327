"""The chat tools through the registry's one door and the real TelegramGateway: each call becomes the TL request
Telegram expects (recorded by the client, answered with real TL results), and the rules hold: who may call
what, a scheduled message to another chat held for the owner like any send, search results archived and never
answered."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from telethon import functions
from telethon.tl import types

from teleton.cli.terminal_gateway import TerminalGateway
from teleton.gateway.contract import ChatInfo, UserInfo
from teleton.llm.tool_loop import ToolCall, ToolResult
from teleton.privacy import Principals, Taint
from teleton.storage import Database
from teleton.tools.families.telegram_chat_tools import chat_tools
from teleton.tools.outbox import Outbox
from teleton.tools.registry import ToolContext, ToolDeps, ToolRegistry
from tests.telegram.conftest import ADMIN, ALICE, GIF_BOT, GROUP, JOINABLE, ME, SUPERGROUP, GatewayHarness, sticker

OWNER_DM = ChatInfo(ADMIN.id, "dm", "Ada")  # ADMIN is the owner here
ALICE_DM = ChatInfo(ALICE.id, "dm", "Alice")
BOOK_CLUB = ChatInfo(-GROUP.id, "group", GROUP.title)  # a basic group: marked id -500
BIG_GROUP = -1_000_000_000_000 - SUPERGROUP.id  # a supergroup's marked id
OWNER = UserInfo(ADMIN.id, "Ada")
MEMBER = UserInfo(ALICE.id, "Alice")


@dataclass
class Door:
    """The registry with its services, and (on Telegram) the gateway's harness and the outbox."""

    registry: ToolRegistry
    deps: ToolDeps
    harness: GatewayHarness | None = None
    outbox: Outbox | None = None

    @property
    def client(self) -> Any:
        assert self.harness is not None
        return self.harness.client

    @property
    def requests(self) -> list[Any]:
        return list(self.client.requests)

    def of(self, kind: type) -> list[Any]:
        return list(self.client.of(kind))

    async def call(
        self,
        where: ChatInfo,
        name: str,
        /,
        *,
        sender: UserInfo = OWNER,
        admin: bool = True,
        taint: Taint | None = None,
        typed: str = "",
        **args: Any,
    ) -> ToolResult:
        """A call of tool ``name`` by ``sender`` in chat ``where``, through the registry as the tool loop makes it;
        ``taint``: what the turn was shown, ``typed``: what the speaker wrote."""
        clearance = self.deps.principals.clearance(where.id)
        ctx = ToolContext(chat=where, sender=sender, is_admin=admin, clearance=clearance, deps=self.deps, message_id=1,
                          taint=taint or Taint(), typed=typed)  # fmt: skip
        return await self.registry.execute(ToolCall(id="t1", name=name, input=args), ctx)


@pytest.fixture
def door(harness: GatewayHarness, tmp_path: Path) -> Door:
    principals = Principals(owner_id=ADMIN.id, admin_ids=frozenset({ADMIN.id}))
    registry = ToolRegistry(chat_tools())
    deps = ToolDeps(db=harness.db, workspace=tmp_path, gateway=harness.gateway, principals=principals)
    outbox = Outbox(harness.db, harness.gateway, principals)  # privacy.cross_chat_sends: approve
    deps.outbox = outbox
    outbox.attach(registry.tools(), deps)
    return Door(registry, deps, harness, outbox)


def ok(result: ToolResult) -> str:
    assert not result.is_error, result.content
    return result.content


def poll_message(msg_id: int, *, out: bool = True, counts: tuple[int, int] | None = (1, 0)) -> types.Message:
    """A poll in the book club as Telegram shows it: its question, options and the counts it carried then."""
    answers = [types.PollAnswer(types.TextWithEntities(t, []), bytes([i])) for i, t in enumerate(("Pizza", "Sushi"))]
    poll = types.Poll(id=77, question=types.TextWithEntities("Lunch?", []), answers=answers, hash=5)
    media = types.MessageMediaPoll(poll=poll, results=results(counts))
    return types.Message(id=msg_id, peer_id=types.PeerChat(GROUP.id), date=datetime.now(UTC), message="", out=out,
                         from_id=types.PeerUser(ME.id if out else ALICE.id), media=media)  # fmt: skip


def results(counts: tuple[int, int] | None) -> types.PollResults:
    if counts is None:  # what someone who has not voted is shown
        return types.PollResults(min=True)
    voters = [types.PollAnswerVoters(bytes([i]), voters=n) for i, n in enumerate(counts)]
    return types.PollResults(results=voters, total_voters=sum(counts))


# -- polls ------------------------------------------------------------------------------------------------
async def test_poll_results_show_telegrams_latest_counts(door: Door) -> None:
    door.client.stored[42] = poll_message(42)
    door.client.poll_counts[42] = results((3, 1))  # votes since the message was last seen
    shown = ok(await door.call(BOOK_CLUB, "poll_results", sender=MEMBER, admin=False, message_id=42))
    [lookup] = door.of(functions.messages.GetMessagesRequest)
    assert [getattr(i, "id", i) for i in lookup.id] == [42]
    [asked] = door.of(functions.messages.GetPollResultsRequest)
    assert (asked.peer, asked.msg_id, asked.poll_hash) == (types.InputPeerChat(GROUP.id), 42, 5)
    assert shown.splitlines() == ["Poll #42 (open, 4 votes): Lunch?", "- Pizza: 3 (75%)", "- Sushi: 1 (25%)"]


async def test_hidden_counts_are_said_to_be_hidden(door: Door) -> None:
    door.client.stored[43] = poll_message(43, counts=None)
    shown = ok(await door.call(BOOK_CLUB, "poll_results", sender=MEMBER, admin=False, message_id=43))
    assert "- Pizza: hidden" in shown and "only after voting" in shown


async def test_poll_results_of_another_chat_are_refused_before_asking_telegram(door: Door) -> None:
    result = await door.call(BOOK_CLUB, "poll_results", sender=MEMBER, admin=False, message_id=42, chat_id=ADMIN.id)
    assert result.is_error and "cannot be read" in result.content
    assert not door.requests
    not_a_poll = await door.call(BOOK_CLUB, "poll_results", message_id=404)
    assert not_a_poll.is_error and "not a poll" in not_a_poll.content


async def test_close_poll_edits_the_poll_closed(door: Door) -> None:
    door.client.stored[42] = poll_message(42)
    refused = await door.call(BOOK_CLUB, "close_poll", sender=MEMBER, admin=False, message_id=42)
    assert refused.is_error and "admin" in refused.content and not door.requests
    assert "Closed the poll #42" in ok(await door.call(BOOK_CLUB, "close_poll", message_id=42))
    [edit] = door.of(functions.messages.EditMessageRequest)
    assert (edit.peer, edit.id) == (types.InputPeerChat(GROUP.id), 42)
    assert isinstance(edit.media, types.InputMediaPoll)
    poll = edit.media.poll
    assert poll.closed is True and poll.id == 77 and poll.question.text == "Lunch?"
    assert [a.text.text for a in poll.answers] == ["Pizza", "Sushi"]


async def test_a_poll_someone_else_sent_is_not_closed(door: Door) -> None:
    door.client.stored[44] = poll_message(44, out=False)
    result = await door.call(BOOK_CLUB, "close_poll", message_id=44)
    assert result.is_error and "someone else" in result.content
    assert not door.of(functions.messages.EditMessageRequest)


# -- Telegram's own scheduled messages ------------------------------------------------------------------------
def later(days: int = 2) -> datetime:
    return (datetime.now().astimezone() + timedelta(days=days)).replace(second=0, microsecond=0)


async def test_schedule_message_hands_telegram_the_time(door: Door) -> None:
    at = later()
    shown = ok(await door.call(OWNER_DM, "schedule_message", text="Call **mum**", at=at.isoformat()))
    [sent] = door.client.sent()
    assert sent.peer == types.InputPeerUser(ADMIN.id, ADMIN.access_hash)
    assert sent.schedule_date == at and sent.message == "Call mum"
    assert [type(e) for e in sent.entities] == [types.MessageEntityBold]
    assert shown.startswith("Scheduled message #10000 in chat")  # the scheduled message's own id


async def test_a_message_scheduled_into_another_chat_waits_for_the_owner(door: Door) -> None:
    at = later(3)
    held = ok(await door.call(OWNER_DM, "schedule_message", text="Meeting moved", at=at.isoformat(),
                              chat_id=BOOK_CLUB.id))  # fmt: skip
    assert "Held for the owner's approval (#1)" in held
    [notice] = door.client.sent()  # nothing to the group: only the owner's notice
    assert notice.peer.user_id == ADMIN.id and "> Meeting moved" in notice.message and notice.schedule_date is None
    assert f"which Telegram sends at {at.astimezone():%Y-%m-%d %H:%M}" in notice.message  # the owner sees when
    row = await door.deps.db.fetchone("select digest, payload from pending_sends where id = 1")
    assert door.outbox is not None
    done = await door.outbox.approve(1, row["digest"][:8], by=ADMIN.id)
    assert done.startswith(f"Done #1: Scheduled for chat {BOOK_CLUB.id}"), done
    scheduled = door.client.sent()[-1]
    assert scheduled.peer == types.InputPeerChat(GROUP.id) and scheduled.message == "Meeting moved"
    assert scheduled.schedule_date == at


async def test_list_and_cancel_scheduled(door: Door) -> None:
    def waiting(msg_id: int, days: int, words: str) -> types.Message:
        return types.Message(id=msg_id, peer_id=types.PeerChat(GROUP.id), date=later(days), message=words, out=True)

    door.client.scheduled = [waiting(8, 5, "second"), waiting(7, 1, "first")]
    shown = ok(await door.call(OWNER_DM, "list_scheduled", chat_id=BOOK_CLUB.id))
    [asked] = door.of(functions.messages.GetScheduledHistoryRequest)
    assert (asked.peer, asked.hash) == (types.InputPeerChat(GROUP.id), 0)
    assert [line.split(" at ")[0] for line in shown.splitlines()] == ["#7", "#8"]  # soonest first
    assert shown.splitlines()[0].endswith(": first")
    ok(await door.call(OWNER_DM, "cancel_scheduled", chat_id=BOOK_CLUB.id, message_ids=[7]))
    [cancel] = door.of(functions.messages.DeleteScheduledMessagesRequest)
    assert (cancel.peer, cancel.id) == (types.InputPeerChat(GROUP.id), [7])


@pytest.mark.parametrize(
    ("chat", "sender", "admin"),
    [(BOOK_CLUB, OWNER, True), (BOOK_CLUB, MEMBER, False), (ALICE_DM, MEMBER, True)],
    ids=["owner_in_a_group", "member_in_a_group", "admin_in_own_dm"],
)
async def test_account_wide_tools_are_the_owners_alone(door: Door, chat: ChatInfo, sender: UserInfo, admin: bool):
    calls: dict[str, dict[str, Any]] = {
        "list_scheduled": {},
        "schedule_message": {"text": "hi", "delay_minutes": 5},
        "cancel_scheduled": {"message_ids": [7]},
        "mark_read": {"chat_id": BOOK_CLUB.id},
        "join_chat": {"link": "https://t.me/+AbCd123"},
        "leave_chat": {"chat": BOOK_CLUB.id},
        "search_telegram": {"query": "bonsai"},
    }
    for name, args in calls.items():
        assert door.registry.get(name).owner_only  # type: ignore[union-attr]
        result = await door.call(chat, name, sender=sender, admin=admin, **args)
        assert result.is_error and "not available" in result.content, name
    assert not door.requests


# -- reading, stickers, joining and leaving --------------------------------------------------------------------
async def test_mark_read_reads_a_group_and_a_supergroup(door: Door) -> None:
    ok(await door.call(OWNER_DM, "mark_read", chat_id=BOOK_CLUB.id))
    ok(await door.call(OWNER_DM, "mark_read", chat_id=BIG_GROUP))
    [basic] = door.of(functions.messages.ReadHistoryRequest)
    assert (basic.peer, basic.max_id) == (types.InputPeerChat(GROUP.id), 0)
    [channel] = door.of(functions.channels.ReadHistoryRequest)
    assert (channel.channel, channel.max_id) == (types.InputChannel(SUPERGROUP.id, SUPERGROUP.access_hash), 0)


async def test_send_sticker_sends_the_first_sticker_for_the_emoji(door: Door) -> None:
    shown = ok(await door.call(BOOK_CLUB, "send_sticker", sender=MEMBER, admin=False, emoji="🎉"))
    [found] = door.of(functions.messages.GetStickersRequest)
    assert (found.emoticon, found.hash) == ("🎉", 0)
    [sent] = door.of(functions.messages.SendMediaRequest)
    assert sent.peer == types.InputPeerChat(GROUP.id)
    document = sticker("🎉")
    assert sent.media == types.InputMediaDocument(
        id=types.InputDocument(document.id, document.access_hash, document.file_reference)
    )
    assert shown.startswith("Sent a 🎉 sticker (message 10000)")
    door.client.stickers["🦄"] = []
    none = await door.call(BOOK_CLUB, "send_sticker", emoji="🦄")
    assert none.is_error and "no sticker" in none.content


async def test_send_gif_asks_telegrams_gif_search_and_sends_its_first_find(door: Door) -> None:
    sent = ok(await door.call(BOOK_CLUB, "send_gif", query="happy dance"))
    [search] = door.of(functions.messages.GetInlineBotResultsRequest)
    assert (search.bot.user_id, search.query) == (GIF_BOT.id, "happy dance")
    [chosen] = door.of(functions.messages.SendInlineBotResultRequest)
    assert (chosen.query_id, chosen.id, chosen.peer) == (4242, "gif-1", types.InputPeerChat(GROUP.id))
    assert sent.startswith("Sent a GIF for 'happy dance'")
    assert door.harness is not None
    door.harness.gateway.settings = replace(door.harness.gateway.settings, mode="bot")
    refused = await door.call(BOOK_CLUB, "send_gif", query="cats")
    assert refused.is_error and "only user accounts" in refused.content  # said, not attempted
    assert len(door.of(functions.messages.GetInlineBotResultsRequest)) == 1


async def test_a_steered_turn_searches_gifs_only_for_words_typed_in_it(door: Door) -> None:
    """A GIF search's words leave for Telegram's GIF bot and its provider: from an owner's turn a group's
    words steered, a query nobody typed (which could carry the owner's memory) is never sent."""
    steered = Taint({"owner", "chat:-500"})
    refused = await door.call(OWNER_DM, "send_gif", query="locker 4711", taint=steered, typed="what did they say?")
    assert refused.is_error and "Not searched" in refused.content
    assert door.of(functions.messages.GetInlineBotResultsRequest) == []
    ok(await door.call(OWNER_DM, "send_gif", query="Happy  dance", taint=steered, typed="send a happy dance gif"))
    [search] = door.of(functions.messages.GetInlineBotResultsRequest)
    assert search.query == "Happy  dance"


async def test_join_by_invite_link_and_by_username(door: Door) -> None:
    joined = ok(await door.call(OWNER_DM, "join_chat", link="https://t.me/+AbCd123"))
    [invite] = door.of(functions.messages.ImportChatInviteRequest)
    assert invite.hash == "AbCd123"
    assert joined == f"Joined Hikers (id -100{JOINABLE.id:010d}, group, @hikers)."
    ok(await door.call(OWNER_DM, "join_chat", link="@hikers"))
    [resolve] = door.of(functions.contacts.ResolveUsernameRequest)
    [join] = door.of(functions.channels.JoinChannelRequest)
    assert resolve.username == "hikers"
    assert join.channel == types.InputChannel(JOINABLE.id, JOINABLE.access_hash)
    unknown = await door.call(OWNER_DM, "join_chat", link="@nobody_here")
    assert unknown.is_error and "Telegram" in unknown.content


async def test_a_steered_turn_joins_or_leaves_only_a_chat_the_owner_wrote(door: Door) -> None:
    """A planted note from a group steers the owner's turn: it may not make the account join the note's chat
    or leave one, unless the owner wrote that chat in their own message."""
    steered = Taint({"owner", "chat:-500"})  # the owner's turn was shown a group's words
    refused = await door.call(OWNER_DM, "join_chat", link="https://t.me/+AbCd123", taint=steered,
                              typed="what did the group say?")  # fmt: skip
    assert refused.is_error and "only when you write it" in refused.content
    left = await door.call(OWNER_DM, "leave_chat", chat="@hikers", taint=steered, typed="summarise")
    assert left.is_error and door.of(functions.channels.LeaveChannelRequest) == []
    assert door.of(functions.messages.ImportChatInviteRequest) == []
    part = await door.call(OWNER_DM, "join_chat", link="https://t.me/+AbCd", taint=steered,
                           typed="join https://t.me/+AbCd123 please")  # fmt: skip
    assert part.is_error and "only when you write it" in part.content  # a part of what was written is not it
    ok(await door.call(OWNER_DM, "join_chat", link="https://t.me/+AbCd123", taint=steered,
                       typed="join https://t.me/+AbCd123 please"))  # fmt: skip
    assert len(door.of(functions.messages.ImportChatInviteRequest)) == 1


async def test_leave_a_supergroup_a_basic_group_and_by_link(door: Door) -> None:
    ok(await door.call(OWNER_DM, "leave_chat", chat=str(BIG_GROUP)))
    ok(await door.call(OWNER_DM, "leave_chat", chat=BOOK_CLUB.id))
    ok(await door.call(OWNER_DM, "leave_chat", chat="t.me/joinchat/XyZ"))
    first, by_link = door.of(functions.channels.LeaveChannelRequest)
    assert first.channel == types.InputChannel(SUPERGROUP.id, SUPERGROUP.access_hash)
    [basic] = door.of(functions.messages.DeleteChatUserRequest)
    assert basic.chat_id == GROUP.id and isinstance(basic.user_id, types.InputUserSelf)
    [check] = door.of(functions.messages.CheckChatInviteRequest)
    assert check.hash == "XyZ" and by_link.channel == types.InputChannel(JOINABLE.id, JOINABLE.access_hash)
    private = await door.call(OWNER_DM, "leave_chat", chat=ALICE.id)
    assert private.is_error and "private chat" in private.content


# -- Telegram's search ----------------------------------------------------------------------------------
def old_message(msg_id: int, words: str, year: int = 2019) -> types.Message:
    return types.Message(id=msg_id, peer_id=types.PeerChat(GROUP.id), date=datetime(year, 5, 1, tzinfo=UTC),
                         message=words, from_id=types.PeerUser(ALICE.id))  # fmt: skip


async def test_search_telegram_archives_its_finds_and_answers_none(door: Door, harness: GatewayHarness) -> None:
    recent = old_message(9, "bonsai meetup @teleton_bot?", datetime.now(UTC).year)
    recent.date, recent.mentioned = datetime.now(UTC), True  # minutes old and addressed to us: still not a turn
    door.client.found = [recent, old_message(3, "my bonsai needs water")]
    shown = ok(await door.call(OWNER_DM, "search_telegram", query="bonsai", chat_id=BOOK_CLUB.id, limit=5))
    [search] = door.of(functions.messages.SearchRequest)
    assert (search.peer, search.q, search.limit) == (types.InputPeerChat(GROUP.id), "bonsai", 5)
    rows = await harness.rows(BOOK_CLUB.id)
    assert [(r["message_id"], r["text"], r["agent_state"]) for r in rows] == [
        (9, "bonsai meetup @teleton_bot?", "history"),
        (3, "my bonsai needs water", "history"),
    ]
    await harness.settle()
    assert harness.agent.seen == []  # found, archived, never a turn (even the recent mention)
    lines = shown.splitlines()
    assert "(from group 'Book club' (chat:-500))" in lines[1] and lines[1].endswith("my bonsai needs water")
    assert lines[-1] == "(2 found on Telegram; all of them are in the archive now.)"


async def test_search_telegram_without_a_chat_searches_every_chat(door: Door, harness: GatewayHarness) -> None:
    forward = old_message(5, "tulip deal: pay at tulips.evil.example", 2020)
    forward.fwd_from = types.MessageFwdHeader(date=datetime(2020, 4, 1, tzinfo=UTC), from_name="Tulip Shop")
    door.client.found = [old_message(4, "tulip bulbs", 2020), forward]
    shown = ok(await door.call(OWNER_DM, "search_telegram", query="tulip"))
    [search] = door.of(functions.messages.SearchGlobalRequest)
    assert search.q == "tulip" and not door.of(functions.messages.SearchRequest)
    assert "tulip bulbs" in shown
    assert "(from a forwarded message (outside: forward:Tulip_Shop))" in shown  # a forward is its sender's words
    assert [r["text"] for r in await harness.rows(BOOK_CLUB.id)] == [
        "tulip bulbs",
        "tulip deal: pay at tulips.evil.example",
    ]
    door.client.found = []
    assert ok(await door.call(OWNER_DM, "search_telegram", query="nothing")) == "Telegram found no matching messages."


# -- in `teleton chat` --------------------------------------------------------------------------------------
async def test_in_the_terminal_they_say_why_not(db: Database, tmp_path: Path) -> None:
    screen = StringIO()
    terminal = TerminalGateway(Console(file=screen), db=db)
    principals = Principals(owner_id=ADMIN.id, owner_chats=frozenset({terminal.chat.id}))
    deps = ToolDeps(db=db, workspace=tmp_path, gateway=terminal, principals=principals)
    door = Door(ToolRegistry(chat_tools()), deps)
    for name, args in (("schedule_message", {"text": "hi", "delay_minutes": 5}), ("join_chat", {"link": "@x1"}),
                       ("search_telegram", {"query": "tulip"}), ("poll_results", {"message_id": 1})):  # fmt: skip
        result = await door.call(terminal.chat, name, **args)
        assert result.is_error and "not available in the terminal" in result.content, (name, result)
    ok(await door.call(terminal.chat, "send_sticker", emoji="🎉"))
    assert "[sticker 🎉]" in screen.getvalue()
