"""From an archived message to an agent turn: the policy gate, rate limits, per-chat lanes, group debounce.

Each conversation (a chat, or one forum topic: ``Thread``) has a lane: its turns run one at a time, in order;
conversations run in parallel. A group's burst is debounced into one turn, and its unanswered messages ride
along as ``earlier_context`` when the agent is next addressed there (a topic sees only its own). A message is
in flight from acceptance to the end of its turn and is never queued twice; buffers and lanes are bounded
and end when idle (docs/architecture.md, "One message, from the update to the reply"). No Telethon here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

import structlog

from teleton.gateway.contract import IncomingHandler, IncomingMessage, Thread, TurnDeferred
from teleton.telegram.receive.policy import Decision, PolicyConfig, decide
from teleton.telegram.receive.ratelimit import RateLimiter

log = structlog.get_logger(__name__)

LANE_IDLE_S = 60.0  # a lane's worker exits after this long without messages
TYPING_EVERY_S = 4.5  # Telegram shows "typing…" for about 5 s per action
CONTEXT_CAP = 50  # unanswered group messages kept per chat
IN_PROGRESS = "already in progress"
SHUTTING_DOWN = "shutting down"
UNDECIDED = (IN_PROGRESS, SHUTTING_DOWN)  # not a verdict on the message: its record stays as it is
FINISHED_KEPT = 20_000  # turns finished in this process, remembered so a late replay is not answered again
CONTEXT_CHATS = 2_000  # chats whose unanswered messages are kept (the least recently active are dropped)
REFUSAL_LOG_EVERY_S = 3600.0  # a chat the policy refuses is logged once an hour, not once per message
DEFER_FIRST_S, DEFER_MAX_S = 1.0, 60.0  # deferred turns are taken up again after this, doubling per deferral


@dataclass(frozen=True)
class DebounceConfig:
    window_s: float = 1.5
    max_factor: int = 3
    max_messages: int = 20


@dataclass
class Gate:
    """The live policy gate in front of the lanes: who is answered (``policy``: /policy and SIGHUP change it),
    the rate limits, and how many messages of each chat type the policy refused. Built before the agent, whose
    /policy command and scheduled turns use it, and handed to the dispatcher."""

    policy: PolicyConfig
    limiter: RateLimiter
    refused: Counter[str] = field(default_factory=Counter)  # chat type -> messages a policy refused


@dataclass
class _Lane:
    queue: asyncio.Queue[IncomingMessage] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    # Messages put and not yet through a finished turn (a queue can be empty while its item is in flight).
    pending: int = 0


@dataclass
class Dispatcher:
    handler: IncomingHandler
    gate: Gate
    debounce: DebounceConfig = field(default_factory=DebounceConfig)
    me_id: Callable[[], int | None] = lambda: None
    typing: Callable[[int, int | None], Awaitable[None]] | None = None  # (chat, forum topic): "typing…"
    context_cap: int = CONTEXT_CAP
    # Messages that must not wait behind the chat's running turn (/stop): handled at once, outside the lane.
    immediate: Callable[[IncomingMessage], bool] | None = None
    context_chats: int = CONTEXT_CHATS
    _urgent: set[asyncio.Task[None]] = field(default_factory=set)
    _lanes: dict[Thread, _Lane] = field(default_factory=dict)
    _context: OrderedDict[Thread, deque[IncomingMessage]] = field(default_factory=OrderedDict)
    _inflight: set[tuple[int, int]] = field(default_factory=set)
    # A replay can race the end of its turn (read "accepted" just before "answered" was committed).
    _finished: OrderedDict[tuple[int, int], None] = field(default_factory=OrderedDict)
    _closing: bool = False
    turns: int = 0
    failures: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    clock: Callable[[], float] = time.monotonic
    _refusal_logged: OrderedDict[int, float] = field(default_factory=OrderedDict)
    # Takes deferred turns up again (the pipeline's recovery pass: what is open and not in flight is offered).
    on_deferred: Callable[[], Awaitable[object]] | None = None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    deferred: int = 0
    _defer_delay: float = DEFER_FIRST_S
    _retry: asyncio.Task[None] | None = None

    def offer(self, msg: IncomingMessage, *, accepted: bool = False, again: bool = False) -> Decision:
        """Gate one archived message; queue it for the agent or keep it as context. Never blocks.

        ``accepted``: the gate already said yes before a restart (recovery): queue it without asking again.
        ``again``: a message answered before is to be answered again (it was edited: ``afterwards``).
        The steps, in order: once (not in flight, not answered here already), the policy, the rate limit
        (never for admins), still open; then the accepted message goes to its lane (or at once: /stop), a
        refused group message is kept as context, and the verdict is counted.
        """
        key = (msg.chat.id, msg.message_id)
        if key in self._inflight or (key in self._finished and not again):
            return Decision(False, IN_PROGRESS)
        decision = Decision(True, "recovered") if accepted else decide(msg, self.gate.policy, self.me_id())
        if decision.accept and not accepted:
            decision = self._rate_limited(msg) or decision
        if self._closing:
            decision = Decision(False, SHUTTING_DOWN)
        if decision.accept:
            self._inflight.add(key)
            self._queue(msg)
        elif decision.keep_as_context:
            self._keep_context(msg)
        # Counted, not logged: a log line per message would cost more than the gate itself under a burst.
        self.decisions[decision.reason] += 1
        if decision.refused:
            self._note_refusal(msg, decision.reason)
        return decision

    def _rate_limited(self, msg: IncomingMessage) -> Decision | None:
        """The refusal of a message over its chat's or the global rate; admins are never limited: the owner
        must always be able to reach (and stop) the agent."""
        if self.gate.policy.is_admin(msg.sender.id if msg.sender else None):
            return None
        limited = self.gate.limiter.allow(msg.chat.id)
        return Decision(False, limited, keep_as_context=msg.chat.type == "group") if limited else None

    def _queue(self, msg: IncomingMessage) -> None:
        """An accepted message into its conversation's lane, or handled at once when ``immediate`` says so."""
        if self.immediate is not None and self.immediate(msg):
            task = asyncio.get_running_loop().create_task(self._urgent_turn(msg), name=f"urgent-{msg.chat.id}")
            self._urgent.add(task)
            task.add_done_callback(self._urgent.discard)
            return
        lane = self._lane(msg.thread)
        lane.pending += 1
        lane.queue.put_nowait(msg)

    def _note_refusal(self, msg: IncomingMessage, reason: str) -> None:
        """Someone the policy does not answer: counted, and logged once an hour per chat (an owner who
        wonders why a friend gets no answer finds it in the log)."""
        self.gate.refused[msg.chat.type] += 1
        now, last = self.clock(), self._refusal_logged.get(msg.chat.id)
        if last is not None and now - last < REFUSAL_LOG_EVERY_S:
            return
        self._refusal_logged[msg.chat.id] = now
        self._refusal_logged.move_to_end(msg.chat.id)
        while len(self._refusal_logged) > CONTEXT_CHATS:
            self._refusal_logged.popitem(last=False)
        sender = msg.sender.id if msg.sender else None
        log.info("message_refused", chat_id=msg.chat.id, chat_type=msg.chat.type, sender_id=sender, reason=reason)

    def queue_depth(self) -> int:
        """Messages accepted but not yet handed to the agent, across all chats (for `teleton status`)."""
        return sum(lane.queue.qsize() for lane in self._lanes.values())

    def pending_context(self, chat_id: int, topic: int = 0) -> list[IncomingMessage]:
        return list(self._context.get(Thread(chat_id, topic), ()))

    def in_flight(self, chat_id: int, message_id: int) -> bool:
        return (chat_id, message_id) in self._inflight

    def _done(self, keys: list[tuple[int, int]]) -> None:
        for key in keys:
            self._inflight.discard(key)
            self._finished[key] = None
        while len(self._finished) > FINISHED_KEPT:
            self._finished.popitem(last=False)

    def _keep_context(self, msg: IncomingMessage) -> None:
        buffer = self._context.get(msg.thread)
        if buffer is None:
            buffer = self._context[msg.thread] = deque(maxlen=self.context_cap)
        self._context.move_to_end(msg.thread)
        buffer.append(msg)
        while len(self._context) > self.context_chats:
            self._context.popitem(last=False)

    def busy(self) -> bool:
        return any(lane.pending > 0 and lane.task is not None and not lane.task.done() for lane in self._lanes.values())

    async def idle(self) -> None:
        """Wait until every queued turn has finished (tests, shutdown)."""
        while self.busy():  # noqa: ASYNC110 - lanes come and go; polling is simpler than an event per lane
            await asyncio.sleep(0.01)

    async def close(self, grace_s: float = 5.0) -> None:
        """Stop taking turns; let running ones finish within ``grace_s``, then cancel the rest."""
        self._closing = True
        tasks = [lane.task for lane in self._lanes.values() if lane.task is not None]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.idle(), grace_s)
        urgent = list(self._urgent)
        if self._retry is not None:
            urgent.append(self._retry)
        for task in [*tasks, *urgent]:
            task.cancel()
        await asyncio.gather(*tasks, *urgent, return_exceptions=True)
        self._lanes.clear()

    def _lane(self, thread: Thread) -> _Lane:
        lane = self._lanes.get(thread)
        if lane is None:
            lane = self._lanes[thread] = _Lane()
        if lane.task is None or lane.task.done():
            name = f"lane-{thread.chat_id}-{thread.topic}"
            lane.task = asyncio.get_running_loop().create_task(self._work(thread, lane), name=name)
        return lane

    async def _work(self, thread: Thread, lane: _Lane) -> None:
        while True:
            try:
                async with asyncio.timeout(LANE_IDLE_S):  # not wait_for: on 3.11 it can swallow a stop's cancel
                    first = await lane.queue.get()
            except TimeoutError:
                if lane.queue.empty():
                    self._lanes.pop(thread, None)
                    return
                continue
            batch = [first]
            try:
                if first.chat.type == "group" and self.debounce.window_s > 0:
                    await self._collect(lane, batch)
                await self._turn(thread, batch)
            finally:
                lane.pending -= len(batch)

    async def _collect(self, lane: _Lane, batch: list[IncomingMessage]) -> None:
        loop = asyncio.get_running_loop()
        cap = loop.time() + self.debounce.window_s * self.debounce.max_factor
        while len(batch) < self.debounce.max_messages:
            wait = min(self.debounce.window_s, cap - loop.time())
            if wait <= 0:
                return
            try:
                async with asyncio.timeout(wait):
                    batch.append(await lane.queue.get())
            except TimeoutError:
                return

    async def _urgent_turn(self, msg: IncomingMessage) -> None:
        keys, deferred = [(msg.chat.id, msg.message_id)], False
        try:
            await self.handler(msg)
        except TurnDeferred as exc:
            deferred = True
            self._defer(keys, str(exc))
        except Exception:
            log.exception("agent_turn_failed", chat_id=msg.chat.id, message_id=msg.message_id)
        finally:
            if not deferred:
                self._done(keys)

    async def _turn(self, thread: Thread, batch: list[IncomingMessage]) -> None:
        chat_id = thread.chat_id
        context = list(self._context.pop(thread, ())) + batch[:-1]
        context.sort(key=lambda m: (m.date, m.message_id))
        msg = replace(batch[-1], earlier_context=tuple(context), answering=tuple(m.message_id for m in batch))
        typing = asyncio.get_running_loop().create_task(self._keep_typing(thread)) if self.typing else None
        keys, deferred = [(chat_id, m.message_id) for m in batch], False
        try:
            await self.handler(msg)
            self.turns += 1
            self._defer_delay = DEFER_FIRST_S
        except TurnDeferred as exc:
            deferred = True
            self._defer(keys, str(exc))
        except Exception:
            # One failed turn must not stop the chat's lane, let alone the daemon.
            self.failures += 1
            log.exception("agent_turn_failed", chat_id=chat_id, message_id=msg.message_id)
        finally:
            if not deferred:
                self._done(keys)
            if typing is not None:
                typing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await typing

    def _defer(self, keys: list[tuple[int, int]], why: str) -> None:
        """A turn that could not record its outcome: its messages stay open (not finished, not in flight)
        and the recovery pass offers them again after a backoff that grows while deferrals go on."""
        for key in keys:
            self._inflight.discard(key)
        self.deferred += len(keys)
        log.warning("turn_deferred", chat_id=keys[0][0], messages=len(keys), why=why, retry_in_s=self._defer_delay)
        if self.on_deferred is None or self._closing or (self._retry is not None and not self._retry.done()):
            return
        delay, self._defer_delay = self._defer_delay, min(self._defer_delay * 2, DEFER_MAX_S)
        self._retry = asyncio.get_running_loop().create_task(self._take_up(delay), name="deferred-turns")

    async def _take_up(self, delay: float) -> None:
        assert self.on_deferred is not None
        while not self._closing:
            await self.sleep(delay)
            try:
                await self.on_deferred()
                return
            except Exception as exc:  # the storage still refuses: wait longer
                log.warning("deferred_retry_failed", error=f"{type(exc).__name__}: {exc}")
                delay = self._defer_delay = min(delay * 2, DEFER_MAX_S)

    async def _keep_typing(self, thread: Thread) -> None:
        assert self.typing is not None
        while True:
            try:
                await self.typing(thread.chat_id, thread.topic or None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a missing typing indicator is cosmetic
                log.debug("typing_failed", chat_id=thread.chat_id, error=str(exc))
            await asyncio.sleep(TYPING_EVERY_S)
