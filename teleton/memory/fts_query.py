"""Turn any user text into a safe FTS5 MATCH expression.

FTS5 has its own query language: quotes, ``*``, ``-``, ``NEAR``, ``AND``/``OR``/``NOT``, ``col:`` filters and
parentheses are syntax, so raw text raises errors or, worse, silently means something else. Here the text is
split into words the same way the FTS tokenizer does (Unicode letters and digits), each word becomes a quoted
string literal (a double quote inside is doubled, so nothing can escape it), and the words are OR-ed, so a
long question still finds rows that share only a few of its words. The expression is passed as a bound
parameter, never pasted into SQL.
"""

from __future__ import annotations

import re

from teleton.memory.stopwords import STOPWORDS

# Letters, digits and marks, like unicode61's token characters; "_" counts as a separator there too.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
MAX_TERMS = 32  # a 10 kB paste must not become a 2,000-term OR that scans the whole index


def query_terms(text: str, *, max_terms: int = MAX_TERMS) -> list[str]:
    """Distinct lower-cased words of ``text``, stopwords removed unless nothing else is left."""
    words = [w.lower() for w in _WORD.findall(text)]
    distinct = list(dict.fromkeys(words))
    kept = [w for w in distinct if w not in STOPWORDS and not (len(w) == 1 and w.isascii())]
    return (kept or distinct)[:max_terms]


def or_expression(terms: list[str]) -> str:
    """OR of the terms, each a quoted FTS5 string (a quote inside is doubled, so nothing escapes it)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def match_expression(text: str, *, max_terms: int = MAX_TERMS) -> str | None:
    """An FTS5 MATCH expression OR-ing the words of ``text``, or None when it has no words at all."""
    terms = query_terms(text, max_terms=max_terms)
    return or_expression(terms) if terms else None
