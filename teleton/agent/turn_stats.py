"""What /status tells about a chat's last turn and its session — the memory it carried, how much of its prompt
the cache served, what it cost — and, for the owner, the same of the whole day from the usage ledger."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from teleton.agent.prompt.memory import KINDS, MemoryUsage
from teleton.agent.window.sessions import Session
from teleton.llm.client import Usage
from teleton.llm.prices import FREE, Price, usd
from teleton.storage.usage import Spent, hit_rate

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


def status_lines(stats: TurnStats | None, session: Session | None, today: Spent | None = None) -> list[str]:
    """/status: memory tokens of the chat's last turn, and the cache hit rate (session, last turn, and the day
    of all chats when ``today`` is given: the owner's)."""
    lines = []
    all_input = session.all_input if session else 0
    rate = "no request this session"
    if session is not None and all_input:
        rate = f"{100 * hit_rate(session.cache_read_tokens, all_input):.0f}% this session"
    day = f"; today {100 * today.hit_rate:.0f}% (all chats)" if today is not None and today.all_input else ""
    if stats is None:
        return [f"Prompt cache hit rate: {rate}{day}; memory of the last turn: none since start"]
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
    lines.append(f"Prompt cache hit rate: {rate}, {100 * last:.0f}% in the last turn{day}")
    return lines


def spend_line(
    price: Price | None, session: Session | None, last: TurnStats | None, today: Spent | None = None
) -> str | None:
    """What this session and the last turn cost at the main model's price (cache writes at the provider's
    write price), and the day of all chats as the ledger priced its turns; None when nothing is priced."""
    if price == FREE:
        return "Spend: none (a local model)"
    parts = []
    if price is not None and session is not None:
        s = session
        total = price.cost(s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_write_tokens)
        parts.append(f"{usd(total)} this session")
        if last is not None:
            u = last.usage
            turn = price.cost(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)
            parts.append(f"{usd(turn)} last turn")
    if today is not None and today.turns > today.unpriced_turns:
        unpriced = f", {today.unpriced_turns} unpriced" if today.unpriced_turns else ""
        turns = f"{today.turns} turn{'' if today.turns == 1 else 's'}"
        parts.append(f"{usd(today.cost_usd)} today (all chats, {turns}{unpriced})")
    return "Spend: " + ", ".join(parts) if parts else None
