"""The model's Markdown, turned into plain text plus Telegram formatting spans.

We never send Markdown for Telegram to parse: a stray ``*`` or ``_`` would then fail the whole reply.
Instead the text is parsed here, leniently, into plain text and spans (bold, italic, code, pre, strike,
links, block quotes); anything that does not parse cleanly stays literal text. The gateway sends the text
with explicit entities, and if Telegram still rejects them, resends the same text without any.

Offsets here are in Python characters; ``teleton.telegram.send.split`` converts them to UTF-16 per part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Inline markup on very long lines is left alone: the lazy patterns could turn quadratic there.
MAX_INLINE_LINE = 10_000


@dataclass(frozen=True)
class Span:
    kind: str  # bold | italic | strike | code | pre | link | blockquote
    offset: int
    length: int
    url: str | None = None
    language: str | None = None

    @property
    def end(self) -> int:
        return self.offset + self.length


_INLINE = re.compile(
    r"(?P<code>`(?P<code_body>[^`\n]+)`)"
    r"|(?P<link>\[(?P<link_text>[^\]\n]+)\]\((?P<link_url>(?:https?|tg)://[^\s)]+|mailto:[^\s)]+)\))"
    r"|(?P<bold>\*\*(?P<bold_body>\S(?:.*?\S)?)\*\*|__(?P<bold_body2>\S(?:.*?\S)?)__)"
    r"|(?P<strike>~~(?P<strike_body>\S(?:.*?\S)?)~~)"
    r"|(?P<italic>(?<![\w*])\*(?P<italic_body>[^\s*](?:[^*\n]*?[^\s*])?)\*(?![\w*])"
    r"|(?<![\w_])_(?P<italic_body2>[^\s_](?:[^_\n]*?[^\s_])?)_(?![\w_]))"
)
_FENCE = re.compile(r"^\s{0,3}(```|~~~)\s*([\w+#.-]*)\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?=\S)")
_QUOTE = re.compile(r"^\s{0,3}>\s?")


def to_telegram(markdown: str) -> tuple[str, list[Span]]:
    """Return (plain text, spans) for Markdown as a model writes it. Never raises on any input."""
    out: list[str] = []
    spans: list[Span] = []
    pos = 0  # length of the output so far, in characters
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line) if len(line) < 200 else None
        if fence:
            body, i = _fenced_body(lines, i + 1, fence.group(1))
            if out and not out[-1].endswith("\n"):
                out.append("\n")
                pos += 1
            if body:
                spans.append(Span("pre", pos, len(body), language=fence.group(2) or ""))
            out.append(body + "\n")
            pos += len(body) + 1
            continue
        text, line_spans = _line(line)
        spans.extend(Span(s.kind, s.offset + pos, s.length, s.url, s.language) for s in line_spans)
        out.append(text + "\n")
        pos += len(text) + 1
        i += 1
    plain = "".join(out)[:-1]  # the loop added one newline too many
    return plain, [s for s in spans if s.length > 0 and s.end <= len(plain)]


def _fenced_body(lines: list[str], start: int, marker: str) -> tuple[str, int]:
    """The code up to the closing fence (or to the end: an unclosed fence is still code)."""
    end = start
    while end < len(lines) and not (lines[end].strip() == marker):
        end += 1
    return "\n".join(lines[start:end]), end + 1


def _line(line: str) -> tuple[str, list[Span]]:
    heading = _HEADING.match(line) if len(line) < MAX_INLINE_LINE else None
    if heading:
        text, spans = _inline(heading.group(1))
        return text, [Span("bold", 0, len(text)), *spans]
    quote = _QUOTE.match(line)
    if quote:
        text, spans = _inline(line[quote.end() :])
        return text, [Span("blockquote", 0, len(text)), *spans]
    bullet = _BULLET.match(line)
    if bullet:
        prefix = bullet.group(1) + "• "
        text, spans = _inline(line[bullet.end() :])
        return prefix + text, [Span(s.kind, s.offset + len(prefix), s.length, s.url) for s in spans]
    return _inline(line)


def _inline(text: str) -> tuple[str, list[Span]]:
    if len(text) > MAX_INLINE_LINE or not any(c in text for c in "`[*_~"):
        return text, []
    out: list[str] = []
    spans: list[Span] = []
    pos = 0
    last = 0
    for m in _INLINE.finditer(text):
        plain = text[last : m.start()]
        out.append(plain)
        pos += len(plain)
        kind, inner_text, inner_spans, url = _match(m)
        spans.append(Span(kind, pos, len(inner_text), url=url))
        spans.extend(Span(s.kind, s.offset + pos, s.length, s.url) for s in inner_spans)
        out.append(inner_text)
        pos += len(inner_text)
        last = m.end()
    out.append(text[last:])
    return "".join(out), spans


def _match(m: re.Match[str]) -> tuple[str, str, list[Span], str | None]:
    if m.group("code"):
        return "code", m.group("code_body"), [], None
    if m.group("link"):
        text, spans = _inline(m.group("link_text"))
        return "link", text, spans, m.group("link_url")
    if m.group("bold"):
        text, spans = _inline(m.group("bold_body") or m.group("bold_body2"))
        return "bold", text, spans, None
    if m.group("strike"):
        text, spans = _inline(m.group("strike_body"))
        return "strike", text, spans, None
    text, spans = _inline(m.group("italic_body") or m.group("italic_body2"))
    return "italic", text, spans, None
