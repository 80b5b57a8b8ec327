"""Word stems for keyword search outside English: the query's language, detected, picks a Snowball stemmer.

The index's tokenizer (porter unicode61) stems English only and keeps other words as written, so "переехала"
in a question misses "переехали" in a message. Rather than a second, stemmed index, a query word of another
language searches as the PREFIX its stem spells ("переех*"), which matches every form with that stem in the
index as it is. Stems shorter than MIN_STEM stay whole words: a three-letter prefix matches too much.

Languages: Russian, Spanish, Portuguese, German, French, Italian, Turkish, Persian, Arabic (Snowball), and
Ukrainian through the Russian stemmer (Snowball has no Ukrainian one; most noun and verb endings are shared).
A word's stem is a prefix of the word except where Arabic strips the article, so Arabic also searches the
stem with "ال" in front. Measured on `scripts/eval_data/multilingual` (R@5 keyword-only / hybrid, before →
after): Russian 0.35 → 0.47 / 0.40 → 0.49, Ukrainian 0.40 → 0.45 / 0.42 → 0.48, Spanish 0.45 → 0.48 / 0.49 →
0.49, Portuguese 0.67 → 0.71 / 0.67 → 0.71, German 0.51 → 0.51 / 0.52 → 0.52, Persian 0.45 → 0.52 / 0.45 →
0.55; English LoCoMo unchanged.
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
