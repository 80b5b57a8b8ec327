"""What /status tells about a chat's last turn: the memory it carried and how much of its prompt the cache served."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from teleton.agent.prompt.memory import KINDS, MemoryUsage
from teleton.agent.window.sessions import Session
from teleton.llm.client import Usage

KEPT_CHATS = 2_000  # chats whose last turn /status can describe (one per active chat)


@dataclass(frozen=True)
class TurnStats:
    memory: MemoryUsage
    usage: Usage  # the API's figures, summed over the turn's requests


class LastTurns:
    """The last turn of each recently active chat, for /status (bounded: the daemon runs for months)."""

    def __init__(self, size: int = KEPT_CHATS) -> None:
        self.size = size
        self._turns: OrderedDict[int, TurnStats] = OrderedDict()

    def record(self, chat_id: int, stats: TurnStats) -> None:
        self._turns.pop(chat_id, None)
        self._turns[chat_id] = stats
        while len(self._turns) > self.size:
            self._turns.popitem(last=False)

    def get(self, chat_id: int) -> TurnStats | None:
        return self._turns.get(chat_id)


def hit_rate(cache_read: int, all_input: int) -> float:
    """Share of the input tokens read from the prompt cache."""
    return cache_read / all_input if all_input else 0.0


def status_lines(stats: TurnStats | None, session: Session | None) -> list[str]:
    """/status: memory tokens of the chat's last turn, and the cache hit rate (session and last turn)."""
    lines = []
    read = session.cache_read_tokens if session else 0
    all_input = session.input_tokens + read if session else 0  # its input_tokens count cache writes too
    rate = f"{100 * hit_rate(read, all_input):.0f}% this session" if all_input else "no request this session"
    if stats is None:
        return [f"Prompt cache hit rate: {rate}; memory of the last turn: none since start"]
    memory = stats.memory
    limit = "no budget" if memory.budget is None else f"{memory.budget:,}"
    kinds = ", ".join(f"{kind} {memory.tokens[kind]:,}" for kind in KINDS if memory.tokens.get(kind))
    dropped = sum(memory.dropped.values())
    lines.append(
        f"Memory in the last turn: {memory.total:,} of {limit} tokens"
        + (f" ({kinds})" if kinds else "")
        + (f"; {dropped:,} items left out" if dropped else "")
    )
    last = hit_rate(stats.usage.cache_read_tokens, stats.usage.prompt_tokens)
    lines.append(f"Prompt cache hit rate: {rate}, {100 * last:.0f}% in the last turn")
    return lines
