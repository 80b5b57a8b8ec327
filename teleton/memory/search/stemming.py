"""Word stems for keyword search outside English: the query's language, detected, picks a Snowball stemmer.

The index stems English only (porter unicode61), so "переехала" misses "переехали". Rather than a second
index, a query word of another language searches as the prefix its stem spells ("переех*"); stems shorter
than ``MIN_STEM`` stay whole words (a short prefix matches too much), and Arabic also searches the stem with
"ال" in front (its stemmer strips the article). Ukrainian goes through the Russian stemmer. The languages:
docs/memory.md, "Other languages"; what it gains: docs/benchmarks.md.
"""

from __future__ import annotations

import threading
import unicodedata
from functools import lru_cache

import snowballstemmer

STEMMERS = {
    "ru": "russian",
    "uk": "russian",
    "es": "spanish",
    "pt": "portuguese",
    "de": "german",
    "fr": "french",
    "it": "italian",
    "tr": "turkish",
    "fa": "persian",
    "ar": "arabic",
}
MIN_STEM = 4
_NON_LATIN = {"ru", "uk", "fa", "ar"}  # a Latin word in such a text is a name or a loan: matched as written
_ARTICLE = {"ar": "ال"}
_stem_lock = threading.Lock()


@lru_cache(maxsize=64)
def _stemmer(algorithm: str) -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer(algorithm)


def stem_prefixes(word: str, language: str | None) -> list[str]:
    """What ``word`` (lower-case) should match as prefixes in the index; [] to match the word as written."""
    algorithm = STEMMERS.get(language or "")
    if algorithm is None or (language in _NON_LATIN and word.isascii()):
        return []
    with _stem_lock:  # snowballstemmer's stemmer objects keep state while they work
        stem = _unaccented_latin(_stemmer(algorithm).stemWord(word))
    if len(stem) < MIN_STEM:
        return []
    article = _ARTICLE.get(language or "")
    return [stem, article + stem] if article else [stem]


def _unaccented_latin(text: str) -> str:
    """Latin letters without diacritics, as the index's unicode61 tokenizer stores them (other scripts keep
    theirs: "й" stays "й")."""
    out = []
    for char in text:
        if char.isascii() or "LATIN" not in unicodedata.name(char, ""):
            out.append(char)
        else:
            out.append("".join(c for c in unicodedata.normalize("NFD", char) if not unicodedata.combining(c)))
    return "".join(out)
