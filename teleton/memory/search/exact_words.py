"""Which keyword candidates hold every word of a keyword-shaped query in their own text (``fusion.lift_exact``).

"Own text" is the corpus's text column when its keyword index has one (a message's words, not the neighbouring
turns in its ``context`` column, nor its sender), else every indexed column (a tool's name and description).
A word holds as the index matches it (porter stemming, diacritics, stem prefixes): the candidates' texts are
matched by FTS5 itself, in a small in-memory table of the searching thread, with the index's tokenizer.
Asking the archive's own index instead costs a walk of each word's whole list of rows per candidate: 10-15 ms
for a common word at 100k messages, where these few texts cost well under a millisecond.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable

from teleton.memory.search.corpora import Corpus
from teleton.memory.search.fts_query import keyword_shaped, keyword_terms
from teleton.storage.migrations.sql import FTS_TOKENIZER
from teleton.storage.sqlite_driver import Connection, pick_driver

# A row's first this many characters are matched: a pasted log is not tokenised again whole for this.
OWN_TEXT_CHARS = 8_192

_local = threading.local()


def exact_matches(conn: Connection, corpus: Corpus, query: str, candidates: Iterable[int]) -> set[int]:
    """The ``candidates`` whose own text holds every word of ``query``; none unless the query is keyword-shaped."""
    ids = list(candidates)
    if not ids or not keyword_shaped(query):
        return set()
    columns = [corpus.text_column] if corpus.text_column in corpus.fts_columns else list(corpus.fts_columns)
    own = " || char(10) || ".join(f"coalesce(substr(t.{c}, 1, {OWN_TEXT_CHARS}), '')" for c in columns)
    sql = f"select t.id, {own} from {corpus.table} t where t.id in (select value from json_each(?))"
    rows = [(int(r[0]), str(r[1])) for r in conn.execute(sql, (json.dumps(ids),))]
    return holding_every(rows, keyword_terms(query))


def holding_every(rows: list[tuple[int, str]], terms: list[str]) -> set[int]:
    """Ids of the (id, text) ``rows`` whose text matches every one of ``terms`` (``keyword_terms``)."""
    if not rows or not terms:
        return set()
    scratch = _scratch()
    scratch.execute("begin")
    try:  # rolled back: the table is empty again, and nothing was ever written
        scratch.executemany("insert into words(rowid, text) values (?, ?)", rows)
        expression = " AND ".join(f"({term})" for term in terms)
        return {int(r[0]) for r in scratch.execute("select rowid from words where words match ?", (expression,))}
    finally:
        scratch.execute("rollback")


def _scratch() -> Connection:
    """This thread's in-memory FTS5 table (the search's own connection is read-only)."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = pick_driver().module.connect(":memory:", isolation_level=None)
        conn.execute(f"create virtual table words using fts5(text, tokenize='{FTS_TOKENIZER}')")
        _local.conn = conn
    return conn
