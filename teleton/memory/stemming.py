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

import re
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

_WORD = re.compile(r"[^\W\d_]+")
_UK_LETTERS, _RU_LETTERS = set("іїєґ"), set("ыэъё")
_FA_LETTERS = set("پچژگکی")  # Persian letters (and its own kaf and yeh) that Arabic text does not use
_LATIN_MARKS = {"es": "ñ¿¡", "pt": "ãõ", "de": "ßäö", "fr": "œâêîôûëïù", "it": "ì", "tr": "ğışİ"}
_FUNCTION_WORDS = {
    language: set(words.split())
    for language, words in {
        "en": "the what did does is are was were when where who how do you and of to in my with have has about",
        "es": "el los las qué que del y en es por con cuándo dónde una un su sus está como para se lo cuál quién "
        "al le les fue tiene va hace",
        "pt": "o os as que do da dos das em no na é não com quando onde um uma você seu sua para está foi qual "
        "quem ao aos pelo pela vai tem fez",
        "de": "der die das und ist nicht wann wo was wie ein eine mit den dem hat haben sind ich du er sie wir wer "
        "welche welcher welches auf im zu von bei für sich ab seit",
        "fr": "le la les et est que qui quand où un une des du pas avec ont sont il elle nous vous pour",
        "it": "il la lo gli le e è che di del della quando dove un una non con ha sono per cosa chi",
        "tr": "ve bir bu ne mi mı da de için nerede kim nasıl var yok ile çok gibi neden",
        "uk": "яка який яке які що як коли де вона він чи або та це від тому чому скільки куди хто",
        "ru": "какая какой какое какие что как когда где она он или это от почему сколько куда кто",
    }.items()
}


@lru_cache(maxsize=256)  # one turn searches the same text in several stores
def detect_language(text: str) -> str | None:
    """The language of ``text`` among English and the stemmed ones, or None when it has no letters.

    The script decides first (Cyrillic: Ukrainian or Russian by their own letters, else by function words;
    Arabic script: Persian by its own letters, else Arabic); Latin text goes to the language with the most
    function words and letter marks, English when nothing points elsewhere (its words are then matched as
    written). py3langid was measured: right on 258 of 260 questions of our set (this: 246; the misses are
    German, Portuguese or Spanish read as another Latin-script language, same R@5), but its model holds 76 MB
    resident.
    """
    letters = [c for c in text.lower() if c.isalpha()]
    cyrillic = sum("\u0400" <= c <= "\u04ff" for c in letters)
    arabic = sum("\u0600" <= c <= "\u06ff" for c in letters)
    latin = sum(c.isascii() or "\u00c0" <= c <= "\u024f" for c in letters)
    if not max(cyrillic, arabic, latin, 0):
        return None
    chars, words = set(letters), set(_WORD.findall(text.lower()))
    if cyrillic >= max(arabic, latin):
        if chars & _UK_LETTERS or (not chars & _RU_LETTERS and _votes(words, "uk") > _votes(words, "ru")):
            return "uk"
        return "ru"
    if arabic >= latin:
        return "fa" if chars & _FA_LETTERS else "ar"
    scores = {lang: _votes(words, lang) + 2 * sum(c in marks for c in letters) for lang, marks in _LATIN_MARKS.items()}
    scores["en"] = _votes(words, "en")
    best = max(scores, key=lambda lang: (scores[lang], lang == "en"))
    return best if scores[best] > 0 else "en"


def _votes(words: set[str], language: str) -> int:
    return len(words & _FUNCTION_WORDS[language])


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
