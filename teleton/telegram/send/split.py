"""Cut a long reply into messages Telegram accepts (4096 UTF-16 units each), at natural boundaries.

Preference: between paragraphs, then lines, then sentences, then words; a hard cut only inside a single
"word" longer than a message. Formatting spans are clipped to each part and converted to UTF-16
offsets, which is what Telegram counts in. Replies too long to be worth sending whole (a runaway model,
a 10 MB paste) are cut to ``max_parts`` messages, the last of which says how much was left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from teleton.telegram.send.markdown import Span, to_telegram

TELEGRAM_LIMIT = 4096
MAX_PARTS = 10
_SENTENCE_END = re.compile(r"[.!?…。](?:[\"')\]]*)\s")


@dataclass(frozen=True)
class Part:
    text: str
    spans: tuple[Span, ...]  # offsets and lengths in UTF-16 code units of ``text``


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def plan_reply(markdown: str, *, limit: int = TELEGRAM_LIMIT, max_parts: int = MAX_PARTS) -> list[Part]:
    """Markdown in, the messages to send out (at least one part for any non-blank input)."""
    budget = limit * max_parts * 2  # never parse what can never be sent
    source = markdown[:budget]
    text, spans = to_telegram(source)
    parts = split_text(text, spans, limit=limit)
    if not parts and source.strip():  # markup with no words in it ("# ", "**"): send it literally
        parts = split_text(source, (), limit=limit)
    omitted = len(markdown) - len(source)
    if len(parts) > max_parts or omitted:
        kept = parts[: max_parts - 1]
        sent = sum(len(p.text) for p in kept)
        left = max(len(text) - sent, 0) + omitted
        kept.append(Part(f"[… reply truncated: {left:,} more characters not sent]", ()))
        parts = kept
    return parts


def split_text(text: str, spans: list[Span] | tuple[Span, ...] = (), *, limit: int = TELEGRAM_LIMIT) -> list[Part]:
    parts: list[Part] = []
    start = _skip_space(text, 0)
    while start < len(text):
        end = _cut(text, start, limit)
        chunk_end = end
        while chunk_end > start and text[chunk_end - 1].isspace():
            chunk_end -= 1
        if chunk_end > start:
            parts.append(_part(text, start, chunk_end, spans))
        start = _skip_space(text, end)
    return parts


def _cut(text: str, start: int, limit: int) -> int:
    """Index where the part starting at ``start`` ends."""
    end = min(len(text), start + limit)
    while utf16_len(text[start:end]) > limit:  # astral characters (emoji) count twice
        end -= max(1, (utf16_len(text[start:end]) - limit) // 2)
    if end >= len(text):
        return len(text)
    window = text[start:end]
    floor = len(window) // 3  # do not make a tiny part just to honour a boundary
    for sep in ("\n\n", "\n"):
        at = window.rfind(sep)
        if at > floor:
            return start + at + len(sep)
    ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if ends and ends[-1] > floor:
        return start + ends[-1]
    at = max(window.rfind(" "), window.rfind("\t"))
    if at > floor:
        return start + at + 1
    return end


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _part(text: str, start: int, end: int, spans: list[Span] | tuple[Span, ...]) -> Part:
    chunk = text[start:end]
    out: list[Span] = []
    for s in spans:
        lo, hi = max(s.offset, start), min(s.end, end)
        if hi <= lo or not text[lo:hi].strip():
            continue  # entities over nothing but whitespace are rejected by Telegram
        off16 = utf16_len(chunk[: lo - start])
        len16 = utf16_len(chunk[lo - start : hi - start])
        out.append(Span(s.kind, off16, len16, s.url, s.language))
    return Part(chunk, tuple(out))
