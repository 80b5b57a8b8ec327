"""Prompt caching as Anthropic documents it, for the fake Messages API and the cache benchmark.

A test or a benchmark can only say whether a prompt is laid out for the cache if the fake bills it the way
the real API would. The rules, from Anthropic's prompt-caching guide
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching, also served as
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching) and the API's own error text:

- The cached prefix is the request in render order: every tool, then every system block, then every content
  block of every message (a message whose content is a string is one block). ``cache_control`` on a block is a
  breakpoint: the prefix up to and including that block. The marker itself is not part of the prefix, so a
  breakpoint that moves from one block to the next does not change the bytes before it. A top-level
  ``cache_control`` (automatic caching) is a breakpoint on the last block.
- At most 4 breakpoints a request; a fifth is a 400 ``invalid_request_error``, "A maximum of 4 blocks with
  cache_control may be provided. Found N." A 1-hour breakpoint may not follow a 5-minute one (longer TTLs
  first), also a 400.
- At each breakpoint the API looks for an entry at that block boundary and then at the boundaries before it,
  up to 20 blocks back (the guide's "up to approximately 20 blocks before your explicit breakpoint"); the
  longest entry found is read. Earlier writes are out of its sight: a request whose breakpoint sits more than
  20 blocks past the last entry misses it (a tool loop adds two blocks a call).
- An entry is written at every breakpoint whose prefix reaches the model's minimum cacheable length (1024
  tokens for Sonnet and Opus 4.x, 2048 for the Haiku 3 models; a parameter here); a shorter prefix is not
  cached at all, silently.
- An entry lives 5 minutes (``{"type": "ephemeral"}``) or 1 hour (``"ttl": "1h"``) and every hit refreshes
  it. The clock is injected, so a benchmark runs an hour of conversation without waiting.
- Usage: ``cache_read_input_tokens`` is the longest hit, ``cache_creation_input_tokens`` the tokens from there
  to the last breakpoint (split by TTL in ``cache_creation``: ``ephemeral_5m_input_tokens`` and
  ``ephemeral_1h_input_tokens``), ``input_tokens`` the tokens after the last breakpoint. Priced as the
  pricing table says: a 5-minute write 1.25 x input, a 1-hour write 2 x, a read 0.1 x.

Tokens are counted as the fakes always did, about 4 characters of a block's JSON to a token, cumulatively
over the prefix (cheap: a 100 kB request is hashed once, block by block). Each request's figures, with its
blocks' digests, are kept in ``PromptCache.log`` for ``scripts/bench_cache.py``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Body = dict[str, Any]

MAX_BREAKPOINTS = 4
LOOKBACK = 20  # block boundaries a breakpoint searches before its own
CHARS_PER_TOKEN = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
WRITE_PRICE = {"5m": 1.25, "1h": 2.0}  # of the input price
READ_PRICE = 0.1


class CacheRequestError(ValueError):
    """A request the real API refuses with 400 ``invalid_request_error``; the message is the API's."""


@dataclass(frozen=True)
class Block:
    """One block of the prefix: where it sits, its bytes' digest (without ``cache_control``), its size."""

    kind: str  # "tool", "system" or "message"
    label: str  # a tool's name, "system[1]", "messages[3][0] user text": for a reader of the log
    digest: str
    chars: int
    ttl: str | None = None  # the breakpoint's TTL when the block carries cache_control


@dataclass
class Figures:
    """One request as the emulation billed it."""

    model: str
    at: float  # the clock when it arrived
    tokens: int  # all input tokens: read + written + input
    read: int
    written_5m: int
    written_1h: int
    input: int
    breakpoints: int
    hit_at: int | None  # the block where the read ends (Anthropic: at its end; None: nothing read)
    tools_same: bool | None  # the tool list equals the previous request's of this model (None: the first)
    blocks: list[Block] = field(repr=False, default_factory=list)

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h

    @property
    def billed(self) -> float:
        """Token-equivalents at the input price."""
        return (
            self.input + WRITE_PRICE["5m"] * self.written_5m + WRITE_PRICE["1h"] * self.written_1h
            + READ_PRICE * self.read
        )  # fmt: skip

    def usage(self) -> dict[str, Any]:
        """The ``usage`` fields of the Messages API (output tokens are the caller's)."""
        return {
            "input_tokens": self.input,
            "cache_read_input_tokens": self.read,
            "cache_creation_input_tokens": self.written,
            "cache_creation": {"ephemeral_5m_input_tokens": self.written_5m,
                               "ephemeral_1h_input_tokens": self.written_1h},
        }  # fmt: skip


def blocks_of(body: Body) -> list[Block]:
    """The request's prefix in render order: tools, system blocks, message content blocks."""
    out: list[Block] = []
    for tool in body.get("tools") or []:
        out.append(_block("tool", str(tool.get("name", "?")), {"tool": tool}, tool))
    system = body.get("system")
    parts = [{"type": "text", "text": system}] if isinstance(system, str) and system else system or []
    for i, part in enumerate(parts):
        out.append(_block("system", f"system[{i}]", {"system": part}, part))
    for m, message in enumerate(body.get("messages") or []):
        role, content = message.get("role", "?"), message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        for j, part in enumerate(parts):
            # The role and where a message starts are rendered too: the same text in another turn is another prefix.
            key = {"role": role, "starts": j == 0, "block": part}
            out.append(_block("message", f"messages[{m}][{j}] {role} {part.get('type', '?')}", key, part))
    automatic = body.get("cache_control")  # automatic caching: a breakpoint on the last block
    if isinstance(automatic, dict) and out and out[-1].ttl is None:
        last = out[-1]
        out[-1] = Block(last.kind, last.label, last.digest, last.chars, _ttl(automatic))
    return out


def _block(kind: str, label: str, key: Body, part: Body) -> Block:
    """``key`` is what the digest covers, ``part`` the block as sent (its size, its marker)."""
    marker = part.get("cache_control")
    digest = hashlib.sha256(json.dumps(without_marker(key), sort_keys=True).encode()).hexdigest()
    chars = len(json.dumps(without_marker(part)))
    return Block(kind, label, digest, chars, _ttl(marker) if isinstance(marker, dict) else None)


def without_marker(value: Any) -> Any:
    """``value`` with every ``cache_control`` key left out (nested too: a tool_result's inner blocks)."""
    if isinstance(value, dict):
        return {k: without_marker(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_marker(v) for v in value]
    return value


def _ttl(marker: Body) -> str:
    ttl = str(marker.get("ttl") or "5m")
    if ttl not in TTL_SECONDS:
        raise CacheRequestError(f"cache_control.ttl: Input should be '5m' or '1h' (got {ttl!r})")
    return ttl


def check(blocks: list[Block]) -> None:
    """Raise the API's 400 for too many breakpoints or a 1-hour one after a 5-minute one."""
    ttls = [b.ttl for b in blocks if b.ttl is not None]
    if len(ttls) > MAX_BREAKPOINTS:
        raise CacheRequestError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(ttls)}."
        )
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        raise CacheRequestError("a cache_control with ttl '1h' must come before every one with ttl '5m'")


class PromptCache:
    """The cache of one API account: entries keyed by the digest of a whole prefix, each with its expiry."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, min_tokens: int = 1024, lookback: int = LOOKBACK
    ) -> None:
        self.clock = clock
        self.min_tokens = min_tokens
        self.lookback = lookback
        self.log: list[Figures] = []
        self._entries: dict[str, tuple[float, float]] = {}  # prefix digest -> (expires at, ttl seconds)
        self._lock = threading.Lock()

    def bill(self, body: Body) -> Figures:
        """Read, write and count one request (``CacheRequestError`` for what the API refuses)."""
        blocks = blocks_of(body)
        check(blocks)
        model = str(body.get("model", ""))
        chains = _chains(model, blocks)
        ends = _ends(blocks)
        marks = [i for i, b in enumerate(blocks) if b.ttl is not None]
        with self._lock:
            now = self.clock()
            hit = self._longest_hit(chains, marks, now)
            read = ends[hit] if hit is not None else 0
            if hit is not None:  # a hit refreshes the entry's lifetime
                ttl_s = self._entries[chains[hit]][1]
                self._entries[chains[hit]] = (now + ttl_s, ttl_s)
            written = {"5m": 0, "1h": 0}
            start = read
            for i in marks:
                if ends[i] < self.min_tokens:
                    continue  # too short to be cached: its tokens are written with the next breakpoint's entry
                ttl = blocks[i].ttl or "5m"
                if ends[i] > start:
                    written[ttl] += ends[i] - start
                    start = ends[i]
                expires, ttl_s = self._entries.get(chains[i], (0.0, 0.0))
                ttl_s = max(ttl_s, TTL_SECONDS[ttl])
                self._entries[chains[i]] = (max(expires, now + TTL_SECONDS[ttl]), ttl_s)
            total = ends[-1] if ends else 0
            tools = [b.digest for b in blocks if b.kind == "tool"]
            previous = next((f for f in reversed(self.log) if f.model == model), None)
            same = None if previous is None else tools == [b.digest for b in previous.blocks if b.kind == "tool"]
            figures = Figures(
                model=model, at=now, tokens=total, read=read, written_5m=written["5m"], written_1h=written["1h"],
                input=total - read - written["5m"] - written["1h"], breakpoints=len(marks), hit_at=hit,
                tools_same=same, blocks=blocks,
            )  # fmt: skip
            self.log.append(figures)
        return figures

    def _longest_hit(self, chains: list[str], marks: list[int], now: float) -> int | None:
        best: int | None = None
        for mark in marks:
            for i in range(mark, max(-1, mark - self.lookback - 1), -1):
                entry = self._entries.get(chains[i])
                if entry is not None and entry[0] > now:
                    if best is None or i > best:
                        best = i
                    break  # the longest within this breakpoint's window
        return best

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.log.clear()


def _chains(model: str, blocks: list[Block]) -> list[str]:
    """The digest of each whole prefix (block 0 to i), per model: a cache is never shared across models."""
    chains, running = [], hashlib.sha256(model.encode()).hexdigest()
    for block in blocks:
        running = hashlib.sha256((running + block.digest).encode()).hexdigest()
        chains.append(running)
    return chains


def _ends(blocks: list[Block]) -> list[int]:
    """Tokens of each prefix, block 0 to i."""
    ends, chars = [], 0
    for block in blocks:
        chars += block.chars
        ends.append(chars // CHARS_PER_TOKEN)
    return ends


class AutomaticCache:
    """OpenAI's automatic prompt caching, for the fake OpenAI-compatible API.

    As OpenAI's guide says (https://developers.openai.com/api/docs/guides/prompt-caching, and its cookbook
    "Prompt Caching 201"): no markers; a prompt of 1024 tokens or more is cached, a hit is an exact match of
    the prompt's beginning (the tools, then the messages, in order, as sent), and the cached length grows in
    steps of 128 tokens. An entry lives a few minutes of inactivity (5 here, the guide's lower bound), a hit
    refreshes it. Reported as ``usage.prompt_tokens_details.cached_tokens``; no write fee. The figures are
    ``Figures`` as above (a tool and a message are one block each) so ``scripts/bench_cache.py`` reads them
    alike; their ``billed`` prices a cached token at 0.1 x, as Anthropic does.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, min_tokens: int = 1024, step: int = 128,
        ttl_s: float = 300.0,
    ) -> None:  # fmt: skip
        self.clock = clock
        self.min_tokens = min_tokens
        self.step = step
        self.ttl_s = ttl_s
        self.log: list[Figures] = []
        self._entries: dict[str, float] = {}  # digest of a prefix of a step's length -> expires at
        self._lock = threading.Lock()

    def bill(self, body: Body) -> Figures:
        model = str(body.get("model", ""))
        blocks, texts = _openai_blocks(body)
        prompt = "".join(texts)
        total = len(prompt) // CHARS_PER_TOKEN
        running = hashlib.sha256(model.encode())
        keys, done = [], 0
        for tokens in range(self.min_tokens, total + 1, self.step):
            running.update(prompt[done : tokens * CHARS_PER_TOKEN].encode())
            done = tokens * CHARS_PER_TOKEN
            keys.append((tokens, running.copy().hexdigest()))
        with self._lock:
            now = self.clock()
            cached = max((t for t, key in keys if self._entries.get(key, 0.0) > now), default=0)
            for _, key in keys:
                self._entries[key] = now + self.ttl_s
            tools = [b.digest for b in blocks if b.kind == "tool"]
            previous = next((f for f in reversed(self.log) if f.model == model), None)
            same = None if previous is None else tools == [b.digest for b in previous.blocks if b.kind == "tool"]
            ends = _ends(blocks)
            hit = next((i for i, end in enumerate(ends) if end >= cached), None) if cached else None
            figures = Figures(
                model=model, at=now, tokens=total, read=cached, written_5m=0, written_1h=0, input=total - cached,
                breakpoints=0, hit_at=hit, tools_same=same, blocks=blocks,
            )  # fmt: skip
            self.log.append(figures)
        return figures


def _openai_blocks(body: Body) -> tuple[list[Block], list[str]]:
    """The prompt as OpenAI reads it: each tool, then each message, with the text each adds to the prefix."""
    blocks, texts = [], []
    for tool in body.get("tools") or []:
        data = json.dumps(tool)
        name = str((tool.get("function") or {}).get("name", "?"))
        blocks.append(Block("tool", name, hashlib.sha256(data.encode()).hexdigest(), len(data)))
        texts.append(data)
    systems = 0
    for m, message in enumerate(body.get("messages") or []):
        data = json.dumps(message)
        role = str(message.get("role", "?"))
        if role in ("system", "developer"):
            kind, label, systems = "system", f"system[{systems}]", systems + 1
        else:
            what = {"user": "text", "tool": "tool_result"}.get(role, "blocks")
            kind, label = "message", f"messages[{m - systems}][0] {role} {what}"
        blocks.append(Block(kind, label, hashlib.sha256(data.encode()).hexdigest(), len(data)))
        texts.append(data)
    return blocks, texts
