"""The receive path, from a converted update to the agent's lane; and recovery after a restart.

The steps of one message, in order (docs/architecture.md, "One message, from the update to the reply"):
1. archive (``submit``): written with the next batch (``archiver``); the insert is the deduplication, so a
   replay, a catch-up or our own message echoing back is archived once. A live message from someone else is
   archived ``archived``, anything else ``history`` (``memory/feed/message_life.py``).
2. offer (after the commit, in commit order): a new live message goes to ``Dispatcher.offer``: once, the
   policy, the rate limit, then its conversation's lane.
3. verdict: ``accepted`` or ``ignored`` into its record with the next batch; the turn closes it later.
A message still open after a crash is offered again when its update is replayed, and at start by ``recover``.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from teleton.gateway.contract import ChatInfo, IncomingMessage, UserInfo
from teleton.memory.feed import archive as fa
from teleton.memory.feed import message_life as life
from teleton.memory.feed import reactions as fr
from teleton.memory.forget.feed import forget_deleted
from teleton.storage import Database
from teleton.storage.sqlite_driver import Connection
from teleton.telegram.receive.archiver import ArchiveBatcher
from teleton.telegram.receive.dispatch import UNDECIDED, Dispatcher
from teleton.telegram.receive.recovery import SendMessage, recover_open, resend_pending

log = structlog.get_logger(__name__)

STALE_AFTER_S = 3600.0  # older messages surfacing in a catch-up are archived, not answered
RECOVERY_WINDOW_S = 1800.0  # accepted messages younger than this are answered after a restart
_OURS_PER_CHAT = 200
_OURS_CHATS = 5_000  # chats whose recent messages of ours are remembered (the least recent forgotten)
# Chat and user rows already written: a miss only writes the small row again, so a few thousand suffice (at
# 50,000, a soak through 20,000 new chats grew by ~25 MB before it filled).
_ENTITY_CACHE = 5_000


@dataclass
class FeedPipeline:
    db: Database
    batcher: ArchiveBatcher
    dispatcher: Dispatcher | None = None
    stale_after_s: float = STALE_AFTER_S
    clock: Callable[[], float] = time.time
    # Called after rows needing embeddings were committed (the background embedder's wake-up).
    on_archived: Callable[[], None] | None = None
    deleted_messages: str = "keep"  # telegram.deleted_messages: keep (marked) | erase (memory.forget_feed)
    # media.describe_all: a message with a photo, voice note or document that the gate did not let through
    # (a group message not addressed to us) is handed here to be read into the archive anyway.
    on_unaddressed_media: Callable[[IncomingMessage], None] | None = None
    send_message: SendMessage | None = None  # the gateway's, for replies a fault cut (``attach``)
    _written: OrderedDict[tuple[str, int], object] = field(default_factory=OrderedDict)
    _ours: OrderedDict[int, deque[int]] = field(default_factory=OrderedDict)
    _writes: set[asyncio.Future[Any]] = field(default_factory=set)
    archived: int = 0
    duplicates: int = 0

    async def message(
        self,
        record: fa.MessageRecord,
        *,
        chat: ChatInfo | None = None,
        users: Sequence[UserInfo] = (),
        incoming: IncomingMessage | None = None,
    ) -> fa.ArchiveResult:
        """Archive one message; then offer it to the agent if it is new, live and from someone else."""
        return await (await self.submit(record, chat=chat, users=users, incoming=incoming))

    async def submit(
        self,
        record: fa.MessageRecord,
        *,
        chat: ChatInfo | None = None,
        users: Sequence[UserInfo] = (),
        incoming: IncomingMessage | None = None,
    ) -> asyncio.Future[fa.ArchiveResult]:
        """``message`` without waiting for the commit: the returned future resolves once the row is committed
        and offered (this waits only while the archive's queue is full: back-pressure).

        The Telethon handler uses this so an update costs nothing while it waits for its batch: no task,
        no frames. The offer runs in the commit's callback, so offers happen in commit order (which is
        arrival order), and never before the commit. The lookups the gate needs (was the replied-to
        message ours? who is a sender a short update named only by id?) run inside the same transaction.
        """
        meta = self._unwritten(chat, users)
        offer = incoming is not None and not record.is_outgoing and self.dispatcher is not None
        offer = offer and self.clock() - record.date <= self.stale_after_s
        state = life.STATE_ARCHIVED if offer else life.STATE_HISTORY
        if offer and incoming is not None and incoming.mentions_us:
            record = replace(record, mentions_us=True)
        reply_id = incoming.reply_to_id if offer and incoming is not None and not incoming.reply_to_us else None
        if incoming is not None and reply_id is not None and reply_id in self._ours.get(record.chat_id, ()):
            incoming = replace(incoming, reply_to_us=True)
            reply_id = None
        bare = incoming.sender if offer and incoming is not None and _bare(incoming.sender) else None
        judging = _judging(record)

        def op(conn: Connection) -> tuple[fa.ArchiveResult, bool, UserInfo | None]:
            _write_meta(conn, meta)
            result = fa.insert_message(conn, record, agent_state=state)
            if not result.new:
                return result, False, None
            if judging is not None:  # "wrong!" in reply to an answer of ours: a correction candidate
                fr.note_feedback(conn, record.chat_id, judging, record.sender_id or 0, "reply", record.date,
                                 reply_id=record.message_id)  # fmt: skip
            ours = reply_id is not None and fa.is_our_message(conn, record.chat_id, reply_id)
            known = fa.known_user(conn, bare.id) if bare is not None else None
            return result, ours, known

        done: asyncio.Future[fa.ArchiveResult] = asyncio.get_running_loop().create_future()

        def committed(write: asyncio.Future[tuple[fa.ArchiveResult, bool, UserInfo | None]]) -> None:
            if write.cancelled() or write.exception() is not None:
                if not done.done():
                    done.set_exception(write.exception() or asyncio.CancelledError())
                return
            result, ours, known = write.result()
            try:
                self._after_commit(record, meta, result, incoming if offer else None, ours, known)
            except Exception:  # a gate bug must not lose the archive's answer
                log.exception("offer_failed", chat_id=record.chat_id, message_id=record.message_id)
            if not done.done():
                done.set_result(result)

        (await self.batcher.put(op)).add_done_callback(committed)
        return done

    def _after_commit(
        self,
        record: fa.MessageRecord,
        meta: list[object],
        result: fa.ArchiveResult,
        incoming: IncomingMessage | None,
        reply_is_ours: bool,
        known: UserInfo | None,
    ) -> None:
        self._remember(meta)
        if record.is_outgoing:
            self._note_ours(record.chat_id, record.message_id)
        if not result.new:
            self.duplicates += 1
            if incoming is not None and result.agent_state in (life.STATE_ARCHIVED, life.STATE_ACCEPTED):
                # A replay of a message still owed an answer (a restart cut its turn): offer it again.
                self._offer(incoming, accepted=result.agent_state == life.STATE_ACCEPTED)
            return
        self.archived += 1
        if self.on_archived is not None:
            self.on_archived()
        if incoming is None or self.dispatcher is None:
            return
        if reply_is_ours:
            incoming = replace(incoming, reply_to_us=True)
        if known is not None:
            incoming = replace(
                incoming,
                sender=UserInfo(
                    id=known.id,
                    first_name=known.first_name,
                    last_name=known.last_name,
                    username=known.username,
                    phone=known.phone,
                    is_bot=known.is_bot,
                ),
            )
        self._offer(incoming)

    def _offer(self, incoming: IncomingMessage, *, accepted: bool = False) -> None:
        """Through the gate (unless ``accepted`` before), then the verdict into the message's record."""
        assert self.dispatcher is not None
        decision = self.dispatcher.offer(incoming, accepted=accepted)
        if decision.reason in UNDECIDED or (accepted and decision.accept):
            return  # its record stays (accepted, or archived for the next start to decide)
        state = life.STATE_ACCEPTED if decision.accept else life.STATE_IGNORED
        note = None if decision.accept else decision.reason
        self._record(incoming.chat.id, incoming.message_id, state, note)
        if not decision.accept and incoming.media is not None and self.on_unaddressed_media is not None:
            self.on_unaddressed_media(incoming)

    def _record(self, chat_id: int, message_id: int, state: str, note: str | None) -> None:
        # Written with the next batch; a crash first leaves it archived, and recovery gates it again.
        write = asyncio.ensure_future(
            self.batcher.put(lambda conn: life.move(conn, chat_id, [message_id], state, note))
        )
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    async def settle(self) -> None:
        """Wait until every verdict written so far is committed (tests, shutdown)."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)
        await self.batcher.drain()

    def attach(
        self,
        dispatcher: Dispatcher,
        send_message: SendMessage,
        unaddressed_media: Callable[[IncomingMessage], None] | None = None,
        archived: Callable[[], None] | None = None,
    ) -> None:
        """The agent's dispatcher behind this pipeline, and the gateway's send for replies owed after a
        fault (``recover``, which also takes up the turns the dispatcher defers). ``unaddressed_media``: where
        media nobody addressed to us goes (``media.describe_all``); ``archived``: called after each commit of
        new or edited messages (it wakes the feed's embedder)."""
        self.dispatcher, self.send_message = dispatcher, send_message
        self.on_unaddressed_media, self.on_archived = unaddressed_media, archived

    async def recover(
        self, window_s: float = RECOVERY_WINDOW_S, me: UserInfo | None = None, *, at_start: bool = True
    ) -> dict[str, int]:
        """Answer what a restart (or a full disk) left open: replies cut while going out are sent again with
        their recorded ids, then each open message is offered once, in order per chat; too old ones fail."""
        assert self.dispatcher is not None
        report: dict[str, int] = {}
        if self.send_message is not None:
            now = self.clock()
            report |= await resend_pending(self.db, self.dispatcher, self.send_message, window_s, now, tasks=at_start)
        report |= await recover_open(self.db, self.dispatcher, self._offer, window_s, self.clock(), me)
        if any(report.values()):
            log.warning("messages_recovered", window_min=round(window_s / 60), **report)
        return report

    async def edit(
        self, record: fa.MessageRecord, *, chat: ChatInfo | None = None, users: Sequence[UserInfo] = ()
    ) -> fa.ArchiveResult:
        meta = self._unwritten(chat, users)

        def op(conn: Connection) -> fa.ArchiveResult:
            _write_meta(conn, meta)
            return fa.apply_edit(conn, record)

        result = await self.batcher.run(op)
        self._remember(meta)
        if self.on_archived is not None:
            self.on_archived()
        return result

    async def delete(self, chat_id: int | None, message_ids: Sequence[int]) -> int:
        if self.deleted_messages == "erase":
            erased = await self.batcher.run(lambda conn: forget_deleted(conn, chat_id, message_ids))
            if erased and self.on_archived is not None:
                self.on_archived()  # the messages after them are embedded again, without them
            return erased
        return await self.batcher.run(lambda conn: fa.mark_deleted(conn, chat_id, message_ids))

    async def reactions(self, change: fr.ReactionChange) -> list[fr.Reaction]:
        """Archive what an update says of a message's reactions (the new ones are returned); a negative one
        to an answer of ours becomes a correction candidate (``memory.feed.reactions``)."""
        now = self.clock()

        def op(conn: Connection) -> list[fr.Reaction]:
            new = fr.apply_change(conn, change, now)
            for r in new:
                if fr.is_negative(r.emoji):
                    fr.note_feedback(conn, change.chat_id, change.message_id, r.user_id, r.emoji, now)
            return new

        return await self.batcher.run(op)

    async def service(
        self,
        record: fa.MessageRecord,
        *,
        chat: ChatInfo | None = None,
        users: Sequence[UserInfo] = (),
        new_title: str | None = None,
        member_delta: int = 0,
    ) -> fa.ArchiveResult:
        """A chat action (title change, join, leave…): archived as a service message, metadata updated."""
        meta = self._unwritten(chat, users)
        now = time.time()

        def op(conn: Connection) -> fa.ArchiveResult:
            _write_meta(conn, meta)
            result = fa.insert_message(conn, record, agent_state=life.STATE_HISTORY)
            if result.new and new_title:
                fa.set_chat_title(conn, record.chat_id, new_title, now)
            if result.new and member_delta:
                fa.adjust_member_count(conn, record.chat_id, member_delta, now)
            return result

        result = await self.batcher.run(op)
        if new_title:
            self._written.pop(("chat", record.chat_id), None)
        return result

    def _note_ours(self, chat_id: int, message_id: int) -> None:
        ours = self._ours.get(chat_id)
        if ours is None:
            ours = self._ours[chat_id] = deque(maxlen=_OURS_PER_CHAT)
        self._ours.move_to_end(chat_id)
        ours.append(message_id)
        while len(self._ours) > _OURS_CHATS:
            self._ours.popitem(last=False)

    def _unwritten(self, chat: ChatInfo | None, users: Sequence[UserInfo]) -> list[object]:
        # Chat and user rows change rarely; writing them with every message would double the write load.
        meta: list[object] = []
        if chat is not None and self._written.get(("chat", chat.id)) != chat:
            meta.append(chat)
        meta.extend(u for u in users if self._written.get(("user", u.id)) != u)
        return meta

    def _remember(self, meta: list[object]) -> None:
        for item in meta:
            kind = "chat" if isinstance(item, ChatInfo) else "user"
            self._written[(kind, item.id)] = item  # type: ignore[attr-defined]
            self._written.move_to_end((kind, item.id))  # type: ignore[attr-defined]
        while len(self._written) > _ENTITY_CACHE:
            self._written.popitem(last=False)


def _judging(record: fa.MessageRecord) -> int | None:
    """The message a reply says is wrong (only ours count, checked when it is written), or None."""
    if record.is_outgoing or record.reply_to_id is None or record.sender_id is None:
        return None
    return record.reply_to_id if fr.says_wrong(record.text) else None


def _bare(sender: UserInfo | None) -> bool:
    """A sender known only by id (Telegram's short updates carry no user object)."""
    return sender is not None and not (sender.username or sender.first_name or sender.last_name)


def _write_meta(conn: Connection, meta: list[object]) -> None:
    now = time.time()
    for item in meta:
        if isinstance(item, ChatInfo):
            fa.upsert_chat(conn, item, now)
        elif isinstance(item, UserInfo):
            fa.upsert_user(conn, item, now)
