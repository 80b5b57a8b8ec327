"""Turn any user text into a safe FTS5 MATCH expression.

FTS5 has its own query language: quotes, ``*``, ``-``, ``NEAR``, ``AND``/``OR``/``NOT``, ``col:`` filters and
parentheses are syntax, so raw text raises errors or, worse, silently means something else. Here the text is
split into words the same way the FTS tokenizer does (Unicode letters and digits), each word becomes a quoted
string literal (a double quote inside is doubled, so nothing can escape it), and the words are OR-ed, so a
long question still finds rows that share only a few of its words. A word of a language the index does not
stem becomes the prefixes of its stem (``stemming``). The expression is passed as a bound parameter, never
pasted into SQL.
"""

from __future__ import annotations

import re

from teleton.memory.search.stemming import stem_prefixes
from teleton.memory.search.stopwords import STOPWORDS
from teleton.text.language import detect_language

# Letters, digits and marks, like unicode61's token characters; "_" counts as a separator there too.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_TERMS = 32  # a 10 kB paste must not become a 2,000-term OR that scans the whole index
DETECT_CHARS = 1_000  # the language of a 10 MB paste is told by its start
# A keyword-shaped query (``keyword_shaped``): at most this many content words and no question form.
MAX_KEYWORD_WORDS = 3
QUESTION_MARKS = "?？؟"
# A first word that makes a question without its question mark ("where did she move"), in the two
# languages the stopwords cover; the others are told by their question mark.
QUESTION_WORDS = frozenset(
    """
    what which who whom whose where when why how did do does is are was were can could would should will
    has have had am shall may might
    что кто где когда куда откуда почему зачем как какой какая какое какие сколько чей ли
    """.split()
)


def query_terms(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """Distinct lower-cased words of ``text``, stopwords removed unless nothing else is left."""
    words = [w.lower() for w in _WORD.findall(text)]
    distinct = list(dict.fromkeys(words))
    kept = [w for w in distinct if w not in STOPWORDS and not (len(w) == 1 and w.isascii())]
    return (kept or distinct)[:max_terms]


def keyword_terms(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """The query's words as FTS5 terms: each a quoted word, or the OR of its stem prefixes (``"переех"*``)."""
    words = query_terms(text, max_terms=max_terms)
    language = query_language(text) if words else None
    terms = []
    for word in words:
        prefixes = stem_prefixes(word, language)
        terms.append(" OR ".join(f"{_quoted(p)}*" for p in prefixes) if prefixes else _quoted(word))
    return list(dict.fromkeys(terms))


def keyword_shaped(text: str) -> bool:
    """Whether ``text`` is typed like a keyword search ("lighthouse", "Anna wedding photos"): one to
    ``MAX_KEYWORD_WORDS`` content words, no question mark and no question word first."""
    if any(mark in text for mark in QUESTION_MARKS):
        return False
    first = _WORD.search(text)
    if first is None or first.group().lower() in QUESTION_WORDS:
        return False
    return len(query_terms(text, max_terms=MAX_KEYWORD_WORDS + 1)) <= MAX_KEYWORD_WORDS


def query_language(text: str) -> str | None:
    """The language ``text`` is searched in (``detect_language`` of its start: a 10 MB paste is told by it)."""
    return detect_language(text[:DETECT_CHARS])


def or_expression(terms: list[str]) -> str:
    """OR of ``keyword_terms`` (each already a safe FTS5 expression)."""
    return " OR ".join(f"({term})" if " OR " in term else term for term in terms)


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def match_expression(text: str, *, max_terms: int = MAX_TERMS) -> str | None:
    """An FTS5 MATCH expression OR-ing the words of ``text``, or None when it has no words at all."""
    terms = keyword_terms(text, max_terms=max_terms)
    return or_expression(terms) if terms else None
