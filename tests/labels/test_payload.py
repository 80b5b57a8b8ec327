"""The preview hides nothing (docs/privacy.md): what the owner approves is what leaves, as a table of tricks.

Each row is one way a payload has been made to look other than it is (a link hiding its query, invisible
characters, look-alike hosts, bare domains, blank runs, forged escapes) with the exact output of
``links``, ``reveal`` or ``strip_invisible``. Property tests then check, over random strings of tricky
characters, that a preview maps back to exactly one text and that stripping leaves nothing unseen.
Pathological inputs show every scan is linear: they finish, and no time is asserted.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import pytest

from teleton.privacy.payload import Link, Revealed, is_invisible, links, reveal, strip_invisible

NO_SCHEME = "no scheme: Telegram links it anyway"
MIXED = "mixed scripts (Cyrillic, Latin)"
LOOKALIKE, PAYPAL = "p\u0430ypal.com", "xn--pypal-4ve.com"  # a Cyrillic "а"; its ASCII form


def link(url: str, host: str, *warnings: str, shown: str | None = None) -> Link:
    return Link(url, host, host if shown is None else shown, warnings)


LINKS: list[tuple[str, str, list[Link]]] = [
    (
        "markdown link hides its query behind innocent text",
        "See [the docs](https://evil.example/c?s=SECRET) now",
        [link("https://evil.example/c?s=SECRET", "evil.example", "hidden behind link text 'the docs'")],
    ),
    (
        "nested parentheses in the destination",
        "[w](https://en.wikipedia.org/wiki/Foo_(bar)_(baz)) x",
        [link("https://en.wikipedia.org/wiki/Foo_(bar)_(baz)", "en.wikipedia.org", "hidden behind link text 'w'")],
    ),
    (
        "a title after the destination",
        '[a](https://x.com/p?k=S "Title here")',
        [link("https://x.com/p?k=S", "x.com", "hidden behind link text 'a'")],
    ),
    (
        "nested brackets in the link text, an image",
        "[a [b] c](https://x.com/1) ![img](https://x.com/i.png?s=1)",
        [
            link("https://x.com/1", "x.com", "hidden behind link text 'a [b] c'"),
            link("https://x.com/i.png?s=1", "x.com", "hidden behind link text 'img'"),
        ],
    ),
    (
        "a destination in angle brackets, with a space",
        "[a](<https://x.com/a b>)",
        [link("https://x.com/a b", "x.com", "hidden behind link text 'a'")],
    ),
    (
        "link text that is itself a different URL: both found",
        "[https://good.com](https://evil.com)",
        [
            link("https://evil.com", "evil.com", "hidden behind link text 'https://good.com'"),
            link("https://good.com", "good.com"),
        ],
    ),
    ("autolink: the URL is the text", "go <https://x.com/a?b=c> now", [link("https://x.com/a?b=c", "x.com")]),
    (
        "trailing punctuation is not the URL, balanced parentheses are",
        "Visit https://x.com/a_(b)). Or (https://x.com/q?x=1). Wow: https://x.com/z?q=1!?, yes",
        [
            link("https://x.com/a_(b)", "x.com"),
            link("https://x.com/q?x=1", "x.com"),
            link("https://x.com/z?q=1", "x.com"),
        ],
    ),
    ("markdown emphasis around a bare URL", "**https://x.com/a**", [link("https://x.com/a", "x.com")]),
    (
        "an unclosed markdown link: the bare URL is still found",
        "[a](https://x.com/a b",
        [link("https://x.com/a", "x.com")],
    ),
    (
        "scheme-less domain with a path: Telegram links it",
        "try evil.example/x?q=S now",
        [link("evil.example/x?q=S", "evil.example", NO_SCHEME)],
    ),
    (
        "www. and a common TLD need no path; a sentence's full stop is not the host",
        "www.example.xyz or write to evil.com.",
        [link("www.example.xyz", "www.example.xyz", NO_SCHEME), link("evil.com", "evil.com", NO_SCHEME)],
    ),
    ("abbreviations, file names and numbers are not links", "e.g. file.txt, i.e. v1.2.3 and 3.14 a.m.", []),
    (
        "a URL inside a scheme-less one belongs to it",
        "x.com/r?u=https://evil.com",
        [link("x.com/r?u=https://evil.com", "x.com", NO_SCHEME)],
    ),
    (
        "punycode host: shown in Unicode, mixed scripts",
        "https://xn--pypal-4ve.com/login",
        [
            link(
                "https://xn--pypal-4ve.com/login",
                PAYPAL,
                "not ASCII",
                MIXED,
                shown=LOOKALIKE,
            )
        ],
    ),
    (
        "Cyrillic look-alike host: ASCII form is punycode",
        f"log in at https://{LOOKALIKE}/ or {LOOKALIKE}",
        [
            link(f"https://{LOOKALIKE}/", PAYPAL, "not ASCII", MIXED, shown=LOOKALIKE),
            link(LOOKALIKE, PAYPAL, NO_SCHEME, "not ASCII", MIXED, shown=LOOKALIKE),
        ],
    ),
    (
        "a whole-Cyrillic host is not mixed, only not ASCII",
        "https://пример.рф/путь",
        [link("https://пример.рф/путь", "xn--e1afmkfd.xn--p1ai", "not ASCII", shown="пример.рф")],
    ),
    (
        "full-width letters go where their ASCII goes",
        "ＥＶＩＬ.com/x",
        [link("ＥＶＩＬ.com/x", "evil.com", NO_SCHEME)],
    ),
    (
        "IP hosts, v4 and v6, with and without a scheme",
        "http://1.2.3.4:8080/x http://[::1]/ 10.0.0.1/admin",
        [
            link("http://1.2.3.4:8080/x", "1.2.3.4", "IP address"),
            link("http://[::1]/", "[::1]", "IP address"),
            link("10.0.0.1/admin", "10.0.0.1", NO_SCHEME, "IP address"),
        ],
    ),
    (
        "user:pass@host: the real host is after the @",
        "https://paypal.com:login@evil.com/",
        [link("https://paypal.com:login@evil.com/", "evil.com", "user name in URL")],
    ),
    (
        "Telegram deep link and mailto have no host",
        "tg://resolve?domain=x&start=S mailto:bob@x.com",
        [link("tg://resolve?domain=x&start=S", ""), link("mailto:bob@x.com", "")],
    ),
    (
        "a zero-width space ends a URL (the rest is not linked)",
        "https://evil.example/x\u200b?q=SECRET",
        [link("https://evil.example/x", "evil.example")],
    ),
    (
        "duplicates kept once, in order of first appearance",
        "https://b.com/ [x](https://a.com) https://a.com https://b.com/ https://a.com",
        [
            link("https://b.com/", "b.com"),
            link("https://a.com", "a.com", "hidden behind link text 'x'"),
            link("https://a.com", "a.com"),
        ],
    ),
    ("empty text", "", []),
]

REVEALS: list[tuple[str, str, tuple[str, dict[str, int]]]] = [
    ("plain text is unchanged", "Hello, world!\n\nBye", ("Hello, world!\n\nBye", {})),
    ("empty text", "", ("", {})),
    (
        "tag characters spell a secret",
        "ok\U000e0053\U000e0065",
        (
            "ok⟦U+E0053 TAG LATIN CAPITAL LETTER S⟧⟦U+E0065 TAG LATIN SMALL LETTER E⟧",
            {"U+E0053 TAG LATIN CAPITAL LETTER S": 1, "U+E0065 TAG LATIN SMALL LETTER E": 1},
        ),
    ),
    (
        "emoji with VS16: kept by strip, shown by reveal",
        "❤\ufe0f",
        ("❤⟦U+FE0F VARIATION SELECTOR-16⟧", {"U+FE0F VARIATION SELECTOR-16": 1}),
    ),
    (
        "family emoji: the joiners are shown",
        "👨\u200d👩\u200d👧",
        ("👨⟦U+200D ZERO WIDTH JOINER⟧👩⟦U+200D ZERO WIDTH JOINER⟧👧", {"U+200D ZERO WIDTH JOINER": 2}),
    ),
    (
        "bidi override",
        "abc\u202edcb",
        ("abc⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧dcb", {"U+202E RIGHT-TO-LEFT OVERRIDE": 1}),
    ),
    (
        "variation selectors smuggling bytes after an emoji",
        "😀\U000e0100\U000e0101",
        (
            "😀⟦U+E0100 VARIATION SELECTOR-17⟧⟦U+E0101 VARIATION SELECTOR-18⟧",
            {"U+E0100 VARIATION SELECTOR-17": 1, "U+E0101 VARIATION SELECTOR-18": 1},
        ),
    ),
    ("no-break space", "100\u00a0km", ("100⟦U+00A0 NO-BREAK SPACE⟧km", {"U+00A0 NO-BREAK SPACE": 1})),
    ("Hangul filler as a blank name", "\u3164", ("⟦U+3164 HANGUL FILLER⟧", {"U+3164 HANGUL FILLER": 1})),
    ("Braille blank", "a\u2800b", ("a⟦U+2800 BRAILLE PATTERN BLANK⟧b", {"U+2800 BRAILLE PATTERN BLANK": 1})),
    (
        "controls, private use and unassigned have no name: the code alone",
        "a\r\nb\ue000\u0378\U000e0000",
        ("a⟦U+000D⟧\nb⟦U+E000⟧⟦U+0378⟧⟦U+E0000⟧", {"U+000D": 1, "U+E000": 1, "U+0378": 1, "U+E0000": 1}),
    ),
    (
        "50 empty lines push the rest away",
        "a" + "\n" * 51 + "b",
        ("a\n\n⟦49 more empty lines⟧b", {"empty lines": 49}),
    ),
    ("two empty lines: one more", "a\n\n\nb", ("a\n\n⟦1 more empty line⟧b", {"empty lines": 1})),
    (
        "trailing spaces and tabs, which is which shown too",
        "a   \nb\t\nc \t",
        (
            "a⟦3 trailing spaces⟧\nb⟦1 trailing tab⟧\nc⟦1 trailing space⟧⟦1 trailing tab⟧",
            {"trailing spaces": 4, "trailing tabs": 2},
        ),
    ),
    (
        "a forged escape is itself escaped",
        "⟦U+200B ZERO WIDTH SPACE⟧ 〚x〛",
        (
            "⟦U+27E6 MATHEMATICAL LEFT WHITE SQUARE BRACKET⟧U+200B ZERO WIDTH SPACE"
            "⟦U+27E7 MATHEMATICAL RIGHT WHITE SQUARE BRACKET⟧ ⟦U+301A LEFT WHITE SQUARE BRACKET⟧x"
            "⟦U+301B RIGHT WHITE SQUARE BRACKET⟧",
            {
                "U+27E6 MATHEMATICAL LEFT WHITE SQUARE BRACKET": 1,
                "U+27E7 MATHEMATICAL RIGHT WHITE SQUARE BRACKET": 1,
                "U+301A LEFT WHITE SQUARE BRACKET": 1,
                "U+301B RIGHT WHITE SQUARE BRACKET": 1,
            },
        ),
    ),
    (
        "found is in order of first appearance, across kinds",
        "x \n\u200b\n\n\n\u200b",
        (
            "x⟦1 trailing space⟧\n⟦U+200B ZERO WIDTH SPACE⟧\n\n⟦1 more empty line⟧⟦U+200B ZERO WIDTH SPACE⟧",
            {"trailing spaces": 1, "U+200B ZERO WIDTH SPACE": 2, "empty lines": 1},
        ),
    ),
]

STRIPS: list[tuple[str, str, tuple[str, int]]] = [
    ("emoji presentation selector kept", "I ❤\ufe0f it", ("I ❤\ufe0f it", 0)),
    ("a second selector goes", "❤\ufe0f\ufe0f", ("❤\ufe0f", 1)),
    ("a selector after an invisible goes", "a\u200b\ufe0f", ("a", 2)),
    ("family emoji joiners kept", "👨\u200d👩\u200d👧", ("👨\u200d👩\u200d👧", 0)),
    ("rainbow flag: joiner after the selector kept", "🏳\ufe0f\u200d🌈", ("🏳\ufe0f\u200d🌈", 0)),
    ("skin tone before a joiner kept", "🧑🏽\u200d💻", ("🧑🏽\u200d💻", 0)),
    ("variation selectors smuggling bytes go", "😀\U000e0100\U000e0101", ("😀", 2)),
    ("joiner between letters goes", "se\u200dcret", ("secret", 1)),
    ("tag characters go", "ok\U000e0053\U000e0065", ("ok", 2)),
    ("bidi override goes", "abc\u202edcb", ("abcdcb", 1)),
    ("no-break space becomes a plain one", "100\u00a0km", ("100 km", 1)),
    ("Hangul filler goes", "\u3164x", ("x", 1)),
    ("line separator becomes a newline, carriage return goes", "a\u2028b\r\nc", ("a\nb\nc", 2)),
    ("plain text untouched", "tab\tand\n\nnewlines ", ("tab\tand\n\nnewlines ", 0)),
]


def revealed(text: str) -> tuple[str, list[tuple[str, int]]]:
    result = reveal(text)
    return result.text, list(result.found.items())  # found's order (of first appearance) counts


CASES: list[tuple[str, Callable[[str], Any], str, Any]] = [
    *((name, links, text, want) for name, text, want in LINKS),
    *((name, revealed, text, (want[0], list(want[1].items()))) for name, text, want in REVEALS),
    *((name, strip_invisible, text, want) for name, text, want in STRIPS),
]


@pytest.mark.parametrize(("call", "text", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_payload_table(call: Callable[[str], Any], text: str, want: Any) -> None:
    assert call(text) == want


INVISIBLES = "\u200b \u200c \u200d \u2060 \ufeff \u00ad \u061c \u180e \u202a \u202e \u2066 \u2069 \U000e0001 \U000e007f"
INVISIBLES += " \r \x00 \x7f \x85 \u2028 \u2029 \u00a0 \u2000 \u200a \u202f \u205f \u3000 \ue000 \U000f0000 \u0378"
INVISIBLES += " \ufe00 \ufe0f \U000e0100 \U000e01ef \u034f \u115f \u1160 \u3164 \uffa0 \u17b4 \u17b5 \u180b"
INVISIBLES += " \u2800 \U0001d159 \U00016fe4"
VISIBLES = "a Z 7 . \n \t é \u0430 ❤ 👨 🏽 ⟦ ⟧ \u0301 \u20e3 \u3042 \u00b7 \u2011"


@pytest.mark.parametrize("ch", INVISIBLES.split(" "))
def test_invisible(ch: str) -> None:
    assert is_invisible(ch)


@pytest.mark.parametrize("ch", [*VISIBLES.split(" "), " "])
def test_visible(ch: str) -> None:
    assert not is_invisible(ch)


def test_clean_only_when_nothing_was_escaped() -> None:
    assert reveal("Hello\n\nworld").clean
    assert not reveal("Hello\u200b").clean
    assert not reveal("Hello \n").clean


# Pathological inputs: each would be quadratic (or worse) with a naive regex or rescan; they must finish.
PATHOLOGICAL = [
    "a." * 100_000,
    "[" * 100_000,
    "[" * 50_000 + "]" * 50_000,
    "](" * 100_000,
    "[](" * 100_000,
    '[a](x "' * 30_000,
    "[a](" * 30_000 + " " + ")" * 30_000,
    "ab." * 100_000,
    " " * 100_000 + "x",
    "\u200b" * 100_000,
    "<a:" * 100_000,
    "1.1.1.1." * 50_000,
]


@pytest.mark.parametrize("text", PATHOLOGICAL, ids=lambda t: repr(t[:8]))
def test_pathological_inputs_finish(text: str) -> None:
    assert links(text) == []
    assert reveal(text).text.count("⟦") == text.count("\u200b")
    assert strip_invisible(text)[1] == text.count("\u200b")


def test_unbalanced_closers_trimmed_in_one_pass() -> None:
    assert links("https://x/" + ")" * 100_000) == [link("https://x/", "x")]


def test_a_megabyte() -> None:
    line = "Hello world, see https://example.com/path?q=1 and пример.рф [a](https://x.y/z) — ok.\n"
    text = line * (1_000_000 // len(line)) + "\u200b"
    assert links(text) == [
        link("https://example.com/path?q=1", "example.com"),
        link("пример.рф", "xn--e1afmkfd.xn--p1ai", NO_SCHEME, "not ASCII", shown="пример.рф"),
        link("https://x.y/z", "x.y", "hidden behind link text 'a'"),
    ]
    assert reveal(text).found == {"U+200B ZERO WIDTH SPACE": 1}
    assert strip_invisible(text) == (text[:-1], 1)


# Property tests over random strings of tricky characters. Which are invisible is restated here, apart
# from teleton.privacy.payload.is_invisible.
INVISIBLE = ["\u200b", "\u200d", "\ufe0f", "\u202e", "\u00a0", "\u3164", "\U000e0041", "\r", "\u2028", "\ue000"]
INVISIBLE += ["\u0378", "\u034f", "\u2800", "\ufe00", "\U000e0100", "\u00ad", "\u2066", "\x00", "\u3000"]
VISIBLE = ["a", "Z", " ", "\t", "\n", ".", "/", "[", "]", "(", ")", "<", ">", ":", "@", "⟦", "⟧", "〚", "❤"]
VISIBLE += ["👨", "🏽", "\u0430", "é", "https://", "www.", ".com", "xn--", "?q=", '"', "!", "*"]
BRACKETS = "⟦⟧〚〛"


def random_text(rng: random.Random) -> str:
    pool = INVISIBLE + VISIBLE + ["\n\n\n", "  \n"]
    return "".join(rng.choice(pool) for _ in range(rng.randrange(0, 40)))


def unreveal(text: str) -> str:
    """The text a preview stands for: each escape decoded, everything else as it is."""

    def decode(m: re.Match[str]) -> str:
        inner = m[1]
        if inner.startswith("U+"):
            return chr(int(inner[2:].split(" ")[0], 16))
        n, what = inner.split(" ", 1)
        return ("\n" if what.startswith("more empty") else " " if what.startswith("trailing space") else "\t") * int(n)

    return re.sub(r"⟦([^⟦⟧]*)⟧", decode, text)


def is_hidden(ch: str) -> bool:
    return ch in INVISIBLE


SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
def test_reveal_properties(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        text = random_text(rng)
        preview: Revealed = reveal(text)
        assert not any(is_hidden(c) for c in preview.text)
        assert strip_invisible(preview.text) == (preview.text, 0)
        assert unreveal(preview.text) == text  # one preview, one text: nothing forged, nothing lost
        plain = not any(is_hidden(c) or c in BRACKETS for c in text)
        plain = plain and "\n\n\n" not in text and not re.search(r"[ \t](?=\n|\Z)", text)
        assert preview.clean == plain
        assert all(found.url in text for found in links(text))


@pytest.mark.parametrize("seed", SEEDS)
def test_strip_properties(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        text = random_text(rng)
        stripped, removed = strip_invisible(text)
        kept = [c for c in stripped if is_hidden(c)]
        assert set(kept) <= {"\u200d", "\ufe0f"}
        assert removed == sum(map(is_hidden, text)) - len(kept)
        assert strip_invisible(stripped) == (stripped, 0)
        # Nothing visible is lost or added: a space stays a (plain) space, a line separator a newline.
        plain = {"\u00a0": " ", "\u3000": " ", "\u2028": "\n"}
        visible = "".join(plain.get(c, "" if is_hidden(c) else c) for c in text)
        assert "".join(c for c in stripped if not is_hidden(c)) == visible
