"""What the owner approves is what leaves (docs/privacy.md, "What the owner sees").

The preview of a held send is plain text with nothing left to render or hide: ``reveal`` turns invisible
characters, blank-line runs and trailing spaces into ``⟦…⟧`` escapes no text can forge; ``strip_invisible`` is
what a cross-label send removes; ``links`` lists every URL a client would make clickable, with its real host
and warnings. Run ``links`` on the text that will leave (after ``strip_invisible``) and show ``Link.url``
through ``reveal``. Pure functions, linear in the text.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cc", "Co", "Cn", "Zl", "Zp", "Zs"})
# Default_Ignorable_Code_Point (DerivedCoreProperties.txt) beyond those categories, drawn as nothing by
# definition (and U+E0000–U+E0FFF, tested apart); then the "blank name" trick: not ignorable, yet empty.
_IGNORABLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u3164\uffa0")
_IGNORABLE |= frozenset(map(chr, range(0xFE00, 0xFE10))) | frozenset("\u2800\U0001d159\U00016fe4")
_BRACKETS = frozenset("⟦⟧〚〛")  # the escape's own brackets, and look-alikes that could pass for them


@lru_cache(maxsize=4096)
def is_invisible(ch: str) -> bool:
    """Whether ``ch`` may pass unseen (or unseen in how it differs from a plain space): a format character
    (Cf: zero-width, bidi controls, tags, soft hyphen), a control (Cc) but newline and tab, private use
    (Co), unassigned (Cn, as of Python's Unicode version), a line or paragraph separator, any space but
    U+0020, any Default_Ignorable_Code_Point (variation selectors, U+034F, the Hangul fillers U+115F U+1160
    U+3164 U+FFA0, Khmer U+17B4 U+17B5, Mongolian U+180B–U+180F) and the blank U+2800, U+1D159, U+16FE4."""
    if ch in "\n\t ":
        return False
    return unicodedata.category(ch) in _INVISIBLE_CATEGORIES or ch in _IGNORABLE or 0xE0000 <= ord(ch) <= 0xE0FFF


class _Table(dict[int, str | None]):
    # A str.translate table filled on first sight of each character: C speed once a character is known.
    def __init__(self, convert: Callable[[str], str | None]) -> None:
        self.convert = convert

    def __missing__(self, cp: int) -> str | None:
        self[cp] = value = self.convert(chr(cp))
        return value


def _escape(ch: str) -> str:
    hidden = is_invisible(ch) or ch in _BRACKETS  # controls have no name in unicodedata: the code alone
    return f"⟦U+{ord(ch):04X} {unicodedata.name(ch, '')}".rstrip() + "⟧" if hidden else ch


def _plain(ch: str) -> str | None:
    # What a cross-label send keeps of an invisible character: a space becomes a plain one (words stay
    # apart, and which space was used carries nothing), a line or paragraph separator a newline.
    kind = unicodedata.category(ch)
    return ch if not is_invisible(ch) else " " if kind == "Zs" else "\n" if kind in ("Zl", "Zp") else None


@dataclass(frozen=True)
class Revealed:
    text: str
    found: dict[str, int]  # what was escaped -> how many (characters, empty lines, trailing spaces or tabs)

    @property
    def clean(self) -> bool:
        return not self.found


_ESCAPED = re.compile(r"⟦([^⟦⟧]*)⟧")
_RUNS = re.compile(r"\n{3,}|(?<![ \t])[ \t]+(?=\n|\Z)")  # the lookbehind tries each run once


def reveal(text: str) -> Revealed:
    """``text`` as the owner must see it: nothing invisible, nothing pushed away, nothing cut."""
    escaped = text.translate(_Table(_escape))
    runs: dict[str, list[int]] = {}  # what -> [where first, how many]

    def count(m: re.Match[str], name: str, n: int, unit: str) -> str:
        runs.setdefault(name, [m.start(), 0])[1] += n
        return f"⟦{n} {unit}{'s' * (n > 1)}⟧"

    def shown(m: re.Match[str]) -> str:
        if m[0][0] == "\n":
            return "\n\n" + count(m, "empty lines", len(m[0]) - 2, "more empty line")
        escapes = []
        for piece in re.findall(r" +|\t+", m[0]):  # which of space and tab ends a line shows too
            kind = "space" if piece[0] == " " else "tab"
            escapes.append(count(m, f"trailing {kind}s", len(piece), f"trailing {kind}"))
        return "".join(escapes)

    shown_text = _RUNS.sub(shown, escaped)
    found = dict(Counter(_ESCAPED.findall(escaped)))  # at C speed: a text may hold a million of them
    order = list(found)
    for i, (first, name, n) in enumerate(sorted((at, name, n) for name, (at, n) in runs.items())):
        order.insert(len(set(_ESCAPED.findall(escaped, 0, first))) + i, name)
        found[name] = n
    return Revealed(shown_text, {name: found[name] for name in order})


def _is_emoji(ch: str) -> bool:  # not U+2800 BRAILLE PATTERN BLANK, which is So too
    return bool(ch) and not is_invisible(ch) and (unicodedata.category(ch) == "So" or 0x1F3FB <= ord(ch) <= 0x1F3FF)


def _keeps_joiner(text: str, i: int) -> bool:
    before = text[i - 1] if i else ""
    if text[i] == "\ufe0f":  # emoji presentation: one selector right after a visible character ("❤️")
        return bool(before) and not is_invisible(before)
    if before == "\ufe0f" and i > 1:  # "🏳️‍🌈": the joiner follows the flag's selector
        before = text[i - 2]
    return _is_emoji(before) and i + 1 < len(text) and _is_emoji(text[i + 1])


def strip_invisible(text: str) -> tuple[str, int]:
    """``text`` without its invisible characters, and how many went (a space other than U+0020 becomes
    one, a line separator a newline). Kept: one U+FE0F right after a visible character, and U+200D between
    two emoji (So, or a skin tone) as in "👨‍👩‍👧"; tag sequences (subdivision flags) do not survive."""
    invisible = sum(n for ch, n in Counter(text).items() if is_invisible(ch))
    if not invisible:
        return text, 0
    table, parts, last, kept = _Table(_plain), [], 0, 0
    for m in re.finditer("[\u200d\ufe0f]", text):
        i = m.start()
        parts.append(text[last:i].translate(table))
        if _keeps_joiner(text, i):
            parts.append(text[i])
            kept += 1
        last = i + 1
    parts.append(text[last:].translate(table))
    return "".join(parts), invisible - kept


@dataclass(frozen=True)
class Link:
    url: str  # exactly as written: scheme (if any), host, path, query, fragment
    host: str  # ASCII (IDNA, lower case); '' when there is none (mailto:, tg://resolve?…, a relative path)
    shown_host: str  # the host as a reader sees it (Unicode)
    warnings: tuple[str, ...] = ()


# Without a path, port or "www.", a name is a link only with one of these TLDs: common ones, less the
# country codes that are also file extensions (md, py, sh, rs, pl, so, ps, ml, cc).
_TLDS = frozenset(
    "com net org info biz io ai app dev me co tv xyz online site top club shop store tech link live pro cloud "
    "page to ly gg ws su ru ua by kz uz am ge az uk us ca de fr it es nl be ch at se no fi dk cz sk hu ro bg "
    "gr tr il ir in cn jp kr tw hk sg au nz br ar mx cl eu asia ton рф укр".split()
)
_SPACE = re.compile(r"[\x00-\x20\x7f]")
_DEST = re.compile(r"[^\x00-\x20\x7f()]*")
_TITLE = r"(?:[\x00-\x20]+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?[\x00-\x20]*\)"
_AFTER_DEST, _POINTY = re.compile(_TITLE), re.compile(r"<([^<>\n]*)>" + _TITLE)
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\x00-\x20<>]*)>")
_START = re.compile(
    r"(?P<scheme>(?<![A-Za-z0-9+.-])(?:[A-Za-z][A-Za-z0-9+.-]{0,31}://|(?:mailto|tg):))"
    r"|(?<![\w.@-])(?P<host>(?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+(?P<tld>[^\W\d_]{2,63}|xn--[a-z0-9-]{1,59})"
    r"(?![\w-])|(?:\d{1,3}\.){3}\d{1,3}(?![\w.-]))(?P<port>:\d{1,5})?",
    re.IGNORECASE,
)
_REST = re.compile(r"[^\s<>\"]*")


def _end_of(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where ``pattern`` (one that may match nothing) stops matching from ``pos``."""
    found = pattern.match(text, pos)
    return found.end() if found else pos


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(//)?")
_OPAQUE = frozenset({"mailto", "tg", "tel", "sms", "javascript", "data", "about"})
_IP = re.compile(r"\[[0-9a-f:.]*\]|(?:0x[0-9a-f]*|\d+)(?:\.(?:0x[0-9a-f]*|\d+)){0,3}\.?")
_TRAILING, _CLOSERS = ".,:;!?'\"`*_~", {")": "(", "]": "[", "}": "{"}
_CJK = dict.fromkeys(("CJK", "HIRAGANA", "KATAKANA", "HANGUL"), "CJK")


def links(text: str) -> list[Link]:
    """Every URL in ``text``, in order of appearance, each once.

    Found: Markdown ``[text](url)`` and ``![alt](url)`` (balanced parentheses in the URL, ``<url>``, a
    title), ``<scheme:…>`` autolinks, bare ``scheme://…``, ``mailto:`` and ``tg:`` URLs, and names without
    a scheme: ``label.label.tld`` (labels of letters, digits and '-', up to 63 long; a TLD of 2–63 letters
    or ``xn--…``) is a link when a path, query, fragment or port follows, when it starts with ``www.``, or
    when its TLD is a common one (``_TLDS``); a dotted IPv4 address only with a path or port. A bare URL
    runs to whitespace, ``<>"`` or an invisible character (a zero-width space ends it, as Telegram is
    taken to do), less trailing ``.,:;!?'"`*_~`` and closing brackets without a partner inside it. A URL
    in a Markdown link's text is found too (sent without a parse mode, the text is linked on its own).
    Warnings: a Markdown link whose text is not its URL; no scheme; a user name; an IP host (dotted,
    decimal, hex or [v6]); a host not in ASCII; letters of more than one script in one label (a letter's
    script is the first word of its Unicode name; Chinese, Japanese and Korean count as one).

    Known false positives: "I.am", "ASP.NET", "go.to" (a common TLD, no path); any "a.bc/…" (a path makes
    every TLD count). Known misses: a rarer TLD with no path ("evil.zip", "evil.pl", "README.md"); a bare
    IPv4 with no path; e-mail addresses and "user@host/…" without a scheme (Telegram makes the first an
    e-mail entity); reference-style Markdown ("[a][r]" … "[r]: url": the definition's URL is found when it
    has a scheme, not the text hiding it); HTML ``<a href>`` (likewise).
    """
    marked = _markdown(text)
    skipped = [(close, end) for _, close, end, _, _ in marked]  # the bare scan skips these, not link texts
    auto = list(_AUTOLINK.finditer(_mask(text, skipped)))
    skipped += [m.span() for m in auto]
    found: list[tuple[int, str, str | None]] = [(start, url, shown) for start, _, _, shown, url in marked]
    found += [(m.start(), m[1], None) for m in auto]
    flat = _mask(text, skipped).translate(_Table(lambda c: " " if is_invisible(c) else c))  # ends a URL
    found += [(start, url, None) for start, url in _bare(flat)]
    unique = dict.fromkeys((url, shown) for _, url, shown in sorted(found, key=lambda f: f[0]) if url)
    return list(dict.fromkeys(_link(url, shown) for url, shown in unique))


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    parts, last = [], 0
    for start, end in sorted(spans):
        parts += [text[last:start], " " * (end - start)]
        last = end
    return "".join([*parts, text[last:]])


def _markdown(text: str) -> list[tuple[int, int, int, str, str]]:
    # One pass over the brackets, each looked at once; a link's destination is skipped past, and nested
    # parentheses are jumped over by their precomputed partner, so no destination is scanned twice.
    if "](" not in text:
        return []
    pairs: dict[int, int] = {}  # "(" -> its ")" within one run without whitespace (as in a destination)
    opened: list[int] = []
    last = 0
    for m in re.finditer("[()]", text):
        if opened and _SPACE.search(text, last, m.start()):  # each gap searched once
            opened.clear()
        last = m.start()
        if m[0] == "(":
            opened.append(last)
        elif opened:
            pairs[opened.pop()] = last
    found: list[tuple[int, int, int, str, str]] = []  # start, "]", end, link text, url
    stack: list[int] = []
    skip = 0
    for m in re.finditer(r"[\[\]]", text):
        i = m.start()
        if i >= skip and m[0] == "[":
            stack.append(i)
        if i < skip or m[0] == "[" or not stack:
            continue
        start = stack.pop()
        if not text.startswith("(", i + 1):
            continue
        if pointy := _POINTY.match(text, i + 2):
            url, end = pointy[1], pointy.end()
        else:
            at = i + 2
            while (at := _end_of(_DEST, text, at)) < len(text) and text[at] == "(" and at in pairs:
                at = pairs[at] + 1
            if not (after := _AFTER_DEST.match(text, at)):
                continue
            url, end = text[i + 2 : at], after.end()
        image = text[start - 1 : start] == "!"  # ![alt](url): the same link, shown as an image
        found.append((start - image, i, end, text[start + 1 : i], url))
        skip, stack = end, []  # a link holds no link: brackets around it are text
    return found


def _bare(flat: str) -> Iterator[tuple[int, str]]:
    # Lookbehinds keep each search from restarting inside a word: one pass, whatever the text.
    pos = 0
    while m := _START.search(flat, pos):
        start, pos = m.start(), m.end()
        tld = (m["tld"] or "").lower()
        if m["scheme"] or flat[pos : pos + 1] in ("/", "?", "#"):
            pos = _end_of(_REST, flat, pos)
            url = _trim(flat[start:pos])
            if len(url) > len(m[0]) or not m["scheme"]:
                yield start, url
        elif m["port"] or m[0].lower().startswith("www.") or tld in _TLDS or tld.startswith("xn--"):
            yield start, m[0]


def _trim(url: str) -> str:
    count, end = Counter(url), len(url)
    while end and ((c := url[end - 1]) in _TRAILING or (c in _CLOSERS and count[c] > count[_CLOSERS[c]])):
        count[c] -= 1
        end -= 1
    return url[:end]


def _link(url: str, text: str | None = None) -> Link:
    scheme = _SCHEME.match(url)
    name = scheme[1].lower() if scheme else ""
    schemed = bool(scheme and (scheme[2] or name in _OPAQUE))
    rest = url[scheme.end() :] if scheme and schemed else url
    authority = "" if schemed and name in _OPAQUE else re.split(r"[/?#\\]", rest, maxsplit=1)[0]
    hostport = authority.rpartition("@")[2]
    host = hostport[: hostport.find("]") + 1] if hostport.startswith("[") else hostport.split(":")[0]
    ascii_host, shown = _host(host)
    warnings = [f"hidden behind link text {text!r}"] if text is not None and text.strip() != url else []
    warnings += ["no scheme: Telegram links it anyway"] if host and not schemed else []
    warnings += ["user name in URL"] if "@" in authority else []
    warnings += ["IP address"] if ascii_host and _IP.fullmatch(ascii_host) else []
    warnings += ["not ASCII"] if not shown.isascii() else []
    mixed: set[str] = set()
    for label in (label for label in shown.split(".") if len(label) <= 63 and not label.isascii()):
        # The first word of a letter's name is its script, closely enough; Chinese, Japanese, Korean mix.
        scripts = {_CJK.get(w := unicodedata.name(c, "?").split()[0], w.capitalize()) for c in label if c.isalpha()}
        mixed |= scripts if len(scripts) > 1 else set()
    warnings += [f"mixed scripts ({', '.join(sorted(mixed))})"] if mixed else []
    return Link(url, ascii_host, shown, tuple(warnings))


def _host(host: str) -> tuple[str, str]:
    """The ASCII and the Unicode form of ``host`` as a browser maps it (UTS 46, closely enough): invisible
    characters dropped, NFKC (full-width letters, "．"), lower case, IDN labels in punycode."""
    if host.startswith("["):
        return host.lower(), host.lower()
    mapped = host if host.isascii() else host.translate(_Table(lambda c: None if is_invisible(c) else c))
    labels = []
    for label in re.split("[.\u3002\uff0e\uff61]", unicodedata.normalize("NFKC", mapped).lower()):
        shown = label
        try:  # a label longer than DNS allows (63) resolves nowhere: kept as written (punycode is quadratic)
            if len(label) <= 63 and not label.isascii():
                label = "xn--" + label.encode("punycode").decode("ascii")
            elif len(label) <= 63 and label.startswith("xn--"):
                shown = label[4:].encode("ascii").decode("punycode")
        except UnicodeError:
            pass
        labels.append((label, shown))
    return ".".join(a for a, _ in labels), ".".join(u for _, u in labels)
