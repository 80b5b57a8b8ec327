"""One turn: everything the runtime's stages build up, and who it answers for."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

from teleton.agent.delivery.records import Delivery, NoRecord
from teleton.agent.delivery.streaming import StreamedReply
from teleton.agent.prompt.memory import MemoryUsage, RagContext
from teleton.agent.window.sessions import Session
from teleton.gateway.contract import IncomingMessage, SentMessage
from teleton.llm.client import Message
from teleton.llm.tool_loop import LoopResult
from teleton.privacy import Clearance, Taint

T = TypeVar("T")


@dataclass
class Turn:
    """Everything one turn builds up as it passes the stages."""

    msg: IncomingMessage
    is_admin: bool
    clearance: Clearance
    taint: Taint
    delivery: Delivery = field(default_factory=NoRecord)
    started: float = field(default_factory=time.monotonic)
    session: Session | None = None
    flush_note: str = ""
    rag: RagContext | None = None
    system: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    stored_user: Message | None = None  # the user message as kept in the session (no RAG blocks)
    sent_user: Message | None = None  # the same with this turn's note and RAG blocks, as sent to the model
    images: list[dict[str, Any]] = field(default_factory=list)  # image blocks of this turn's request only
    spoken: bool = False  # the message was a voice or video note (media.voice_replies: when_spoken_to)
    memory: MemoryUsage | None = None  # tokens of memory the prompt holds, per kind (``prompt.budget``)
    result: LoopResult | None = None
    reply: str = ""
    failed: str | None = None  # why the model gave no answer (the user got an apology instead)
    undelivered: str | None = None  # why the reply did not reach the chat
    reply_ids: tuple[int, ...] = ()  # the messages the reply went out as
    stream: StreamedReply | None = None  # its answer shown while written (a private chat), until the reply takes it
    slow_notice: SentMessage | None = None  # "the model is slow to answer" sent before the answer (``slow_notice``)
    timings: dict[str, float] = field(default_factory=dict)  # stage -> ms, logged with turn_done
    silent_token: str | None = None  # a reply that is exactly this is not sent (heartbeat: nothing fired)
    from_task: bool = False  # a scheduled task's turn
    # What the speaker typed (``ToolContext.typed``): not a file's text, nor a forward's, nor a task's.
    typed: str = ""
    # A session swap in progress (compaction, expiry): it must finish, even when the turn is stopped,
    # before the chat's next turn may start.
    swapping: asyncio.Task[Any] | None = None

    def steering(self) -> frozenset[str]:
        """What may have steered this turn: other labels' words and outside content it was shown."""
        return self.taint.steering(self.clearance.label)


def required(value: T | None) -> T:
    if value is None:
        raise RuntimeError("pipeline stage ran out of order")
    return value
