"""BM25 with the statistics of the searched scope only.

FTS5's ``bm25()`` weighs words by the whole table, so one chat's ranking would move whenever other chats
talk; a scoped search (one chat, some fact scopes or knowledge labels) ranks here with the counts of the rows
the scope admits, by FTS5's own formula, so a store holding one scope ranks exactly as FTS5 does. A word's
count in a row comes from ``highlight()``'s markers in a short row and from ``bm25()`` in a long one
(docs/memory.md, "BM25 within a scope"; the costs under "Hybrid search").
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from teleton.memory.search.fts_query import or_expression
from teleton.storage.sqlite_driver import Connection

K1 = 1.2
B = 0.75
COUNT_DECIMALS = 4  # of a weighted count read back from bm25() (see _weighted_count)
LENGTH_SAMPLE = 1_000  # rows (the scope's newest) the average length is taken from; exact for small scopes
SHORT_ROW_BYTES = 8_192  # a row's columns (UTF-8) up to which its counts come from highlight() (see above)
# Past this many matching rows of a word, bm25()'s one table-wide count costs less than highlight() in each row
# (~20-30 us a message at 1M messages; 2,000 matches in one chat: 21 ms against 17). The keyword leg of 150
# searches in random chats of bench_scale's 1M archive, p95: 18 ms with 300 here, 26 ms with 1,000.
HIGHLIGHT_MAX_ROWS = 300
# ... and only in a table of more rows than this: bm25()'s table-wide counts are cheap in a smaller one, where it
# took half the time of highlight() (issue 57: a group of 1,100 messages in a 100k archive, 20 ms against 40).
HIGHLIGHT_MIN_TABLE_ROWS = 200_000


@dataclass(frozen=True)
class Scope:
    """The rows whose statistics a search uses: an FTS5 expression AND-ed into the MATCH (``fts_filter``, e.g.
    the feed's chat tokens) or a condition on the base table ``t`` with its bound ``args``. ``only`` (with
    ``only_args``) narrows the rows ranked without changing the statistics (fact recall's categories)."""

    fts_filter: str | None = None
    where: str | None = None
    args: tuple[Any, ...] = ()
    only: str | None = None
    only_args: tuple[Any, ...] = ()


def local_bm25(
    conn: Connection,
    *,
    fts: str,
    table: str,
    weights: Sequence[float],
    terms: Sequence[str],
    scope: Scope,
    limit: int,
    max_matches: int,
) -> dict[int, float]:
    """Row id -> BM25 (positive, higher is better) of the best ``limit`` rows of ``scope`` matching any term.

    When the terms together match more than ``max_matches`` rows of the scope, the most common ones are
    dropped first (the rarest always stays), as the unscoped search does, and of a word still that common
    only the newest ``max_matches`` rows are scored. A word's count stops past ``max_matches``: such a word
    is either dropped or the only one kept, when its IDF is a constant factor of every score.
    """
    if limit <= 0:
        return {}
    search = _Search(conn, fts, table, scope)
    rows = search.count(None)
    if scope.only is None and rows <= HIGHLIGHT_MAX_ROWS and rows * len(terms) <= max_matches:
        # A small scope: no word can be dropped and each word's matches are all its rows, so one query per
        # word finds both (a stem prefix costs 1-3 ms a query at 1M messages, whatever the scope's size).
        found = {term: word_counts(search, term, weights, max_matches, rows) for term in terms}
        counts = {term: len(by_row) for term, by_row in found.items()}
    else:
        counts = term_counts(conn, fts=fts, table=table, scope=scope, terms=terms, cap=max_matches + 1)
        found = {}
    kept = drop_common_terms({term: n for term, n in counts.items() if n > 0}, max_matches)
    if not kept:
        return {}
    # Each statement reads the database as it is then: messages arriving (or erased) between them can leave a
    # word with more matches than the scope had rows when counted (and its IDF undefined).
    rows = max(rows, *(counts[term] for term in kept))
    idf = {term: max(1e-6, math.log((rows - counts[term] + 0.5) / (counts[term] + 0.5))) for term in kept}
    frequency: dict[int, dict[str, float]] = {}
    for term in kept:
        by_row = found.get(term) or word_counts(search, term, weights, max_matches, counts[term])
        for row_id, tf in by_row.items():
            frequency.setdefault(row_id, {})[term] = tf
    lengths = search.lengths(list(frequency))
    average = search.average_length()
    scores = {}
    for row_id, by_term in frequency.items():
        norm = K1 * (1 - B + B * lengths.get(row_id, 0) / average) if average > 0 else K1
        scores[row_id] = sum(idf[t] * tf * (K1 + 1) / (tf + norm) for t, tf in by_term.items())
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return dict(best)


def term_counts(
    conn: Connection, *, fts: str, table: str, scope: Scope, terms: Sequence[str], cap: int
) -> dict[str, int]:
    """Rows of ``scope`` (``Scope()``: the whole table) matching each term, counted up to ``cap``: past it
    a term's exact count decides nothing (see ``drop_common_terms``) and would cost more than the search."""
    search = _Search(conn, fts, table, scope)
    return {term: search.count(_phrase(term), cap=cap) for term in terms}


def _phrase(term: str) -> str:
    return or_expression([term])


def word_counts(search: _Search, term: str, weights: Sequence[float], newest: int, matches: int) -> dict[int, float]:
    """Row id -> column-weighted count of ``term``'s matches, for the ``newest`` scope rows it matches
    (``matches`` of them as ``term_counts`` counted, or at most that many).

    ``bm25()`` sums a score per phrase of the MATCH, so a term of several stem prefixes (``keyword_terms``)
    is counted one prefix at a time; a prefix that extends another one matches nothing the shorter one does
    not, and is left out so no word counts twice.
    """
    counts: dict[int, float] = {}
    marks = matches <= HIGHLIGHT_MAX_ROWS and search.table_rows() > HIGHLIGHT_MIN_TABLE_ROWS
    for phrase in _prefix_phrases(term):
        for row_id, tf in search.frequencies(phrase, weights, newest, marks=marks):
            counts[row_id] = counts.get(row_id, 0.0) + tf
    return dict(sorted(counts.items(), reverse=True)[:newest])


def _prefix_phrases(term: str) -> list[str]:
    """The phrases of a ``keyword_terms`` term (one quoted word, or stem prefixes ``"stem"*`` OR-ed), less
    the prefixes that extend another one."""
    phrases = term.split(" OR ")
    prefixes = {p[1:-2] for p in phrases if p.endswith('"*')}  # "stem"* -> stem

    def extends_another(phrase: str) -> bool:
        stem = phrase[1:-2]
        return phrase.endswith('"*') and any(stem != other and stem.startswith(other) for other in prefixes)

    return [p for p in phrases if not extends_another(p)]


def drop_common_terms(counts: dict[str, int], max_matches: int) -> list[str]:
    """The query's words (``counts``: each one's matching rows, in the query's order), the most common dropped
    while together they match more than ``max_matches`` rows; the rarest always stays (see MAX_KEYWORD_MATCHES
    in hybrid_search)."""
    kept = sorted(counts, key=lambda term: counts[term])
    while len(kept) > 1 and sum(counts[term] for term in kept) > max_matches:
        kept.pop()
    return [term for term in counts if term in kept]


class _Search:
    """The queries of one scope; table names are constants of the caller's corpus, user text is bound."""

    def __init__(self, conn: Connection, fts: str, table: str, scope: Scope) -> None:
        self.conn, self.fts, self.table, self.scope = conn, fts, table, scope
        self._lengths: dict[int, int] = {}  # row lengths ``frequencies`` read already: not read twice
        self._columns: list[str] = []  # the FTS table's, read once per search
        self._table_rows: int | None = None

    def _from(self, expression: str | None, ranked: bool = False) -> tuple[str, list[Any], str]:
        """FROM + WHERE of the scope's rows matching ``expression`` (None: all of them), and their id;
        ``ranked``: only those the search may return."""
        conditions = [(self.scope.where, self.scope.args)]
        if ranked:
            conditions.append((self.scope.only, self.scope.only_args))
        where = " and ".join(c for c, _ in conditions if c)
        args = [a for c, values in conditions if c for a in values]
        match = " AND ".join(f"({p})" for p in (self.scope.fts_filter, expression) if p)
        if not match:  # the whole scope from the base table: a MATCH-less FTS query would read every row
            assert where, "a scope needs an FTS filter or a condition"
            return f"from {self.table} t where {where}", args, "t.id"
        if not where:
            return f"from {self.fts} where {self.fts} match ?", [match], f"{self.fts}.rowid"
        return (
            f"from {self.fts} join {self.table} t on t.id = {self.fts}.rowid where {where} and {self.fts} match ?",
            [*args, match],
            f"{self.fts}.rowid",
        )

    def count(self, expression: str | None, cap: int | None = None) -> int:
        sql, args, _ = self._from(expression)
        if cap is None:
            return int(self.conn.execute(f"select count(*) {sql}", args).fetchone()[0])
        return int(self.conn.execute(f"select count(*) from (select 1 {sql} limit ?)", [*args, cap]).fetchone()[0])

    def frequencies(
        self, phrase: str, weights: Sequence[float], newest: int, marks: bool = True
    ) -> list[tuple[int, float]]:
        """(row id, column-weighted match count) of the ``newest`` scope rows matching one ``phrase``.

        With ``marks``, a short row's count in a column is the length ``highlight()`` adds to it, one marker per
        match (a marker character the text already holds cancels out: it cannot make a row look more relevant;
        counted in SQL, the text never comes to Python: a quarter of the time per row). A long row's comes
        from bm25(): FTS5's score of a row is ``idf * f * (K1 + 1) / (f + k)`` with ``f`` the weighted count
        and ``k`` from the row's length and the table's average; the same row with doubled weights gives
        ``2f``, and the two scores give ``x = f / k``. ``k`` is computed as FTS5 computes it, from the table's
        totals (its averages record, read in the same statement, so from the same snapshot) and the row's
        ``_docsize``. CASE evaluates only its taken branch, so a statement of short rows never calls bm25().
        Scope phrases (the feed's chat token) sit in a column of weight 0 and add nothing.
        """
        fts = self.fts
        names = self.columns()
        weighted = [(names[i], w) for i, w in enumerate(weights) if w]
        size = " + ".join(f"coalesce(length(cast({fts}.{name} as blob)), 0)" for name, _ in weighted)
        short = f"({size}) <= {SHORT_ROW_BYTES}" if marks else "0"
        single = ", ".join(str(float(w)) for w in weights)
        double = ", ".join(str(2 * float(w)) for w in weights)
        added = [
            f"length(highlight({fts}, {names.index(name)}, char(1), '')) - length({fts}.{name})" for name, _ in weighted
        ]
        marked = ", ".join(f"iif({short}, coalesce({n}, 0), null)" for n in added)
        sql, args, row_id = self._from(phrase, ranked=True)
        rows = self.conn.execute(
            f"select {row_id}, (select sz from {fts}_docsize where id = {row_id}), "
            f"iif({short}, null, bm25({fts}, {single})), iif({short}, null, bm25({fts}, {double})), "
            f"(select block from {fts}_data where id = 1), {marked} {sql} order by {row_id} desc limit ?",
            [*args, newest],
        ).fetchall()
        if not rows:
            return []
        table_rows, *column_tokens = _varints(rows[0][4])
        average = sum(column_tokens) / table_rows
        found = []
        for r in rows:
            length = self._lengths[r[0]] = _row_length(r[1]) if r[1] else 0
            if r[2] is None:  # short: highlight()'s markers
                count = sum(w * marks for marks, (_, w) in zip(r[5:], weighted, strict=True))
            else:
                count = _weighted_count(r[2], r[3], length, average)
            found.append((int(r[0]), count))
        return found

    def table_rows(self) -> int:
        """The FTS table's rows (its averages record), read once per search."""
        if self._table_rows is None:
            found = self.conn.execute(f"select block from {self.fts}_data where id = 1").fetchone()
            self._table_rows = _varints(found[0])[0] if found and found[0] else 0
        return self._table_rows

    def columns(self) -> list[str]:
        if not self._columns:
            self._columns = [r[1] for r in self.conn.execute(f"select * from pragma_table_info('{self.fts}')")]
        return self._columns

    def lengths(self, ids: list[int]) -> dict[int, int]:
        missing = [i for i in ids if i not in self._lengths]
        if missing:
            sql = f"select id, sz from {self.fts}_docsize where id in (select value from json_each(?))"
            rows = self.conn.execute(sql, (json.dumps(missing),))
            self._lengths.update({int(r[0]): _row_length(r[1]) for r in rows})
        return {i: self._lengths[i] for i in ids if i in self._lengths}

    def average_length(self) -> float:
        """Tokens per row of the scope's newest LENGTH_SAMPLE rows. Their ``_docsize`` records come back as
        one value (varints delimit themselves): 1,000 rows as tuples cost more in Python than the search."""
        sql, args, row_id = self._from(None)
        newest = f"select {row_id} {sql} order by {row_id} desc limit {LENGTH_SAMPLE}"
        rows, sizes = self.conn.execute(
            f"select count(*), cast(group_concat(sz, '') as blob) from {self.fts}_docsize where id in ({newest})",
            args,
        ).fetchone()
        return _row_length(sizes) / rows if rows else 0.0


def _weighted_count(single: float, double: float, length: int, average: float) -> float:
    """``f`` from bm25() with the weights once (``single``) and doubled (see ``_Search.frequencies``)."""
    if not single or not double or not length:
        return 0.0  # matched in columns of weight 0 only
    ratio = double / single  # = 2 (x + 1) / (2x + 1)
    x = (2.0 - ratio) / (2.0 * (ratio - 1.0))
    # f is whole counts times weights of a decimal place or two: rounding drops the float noise of the
    # inversion, so a row's count never depends on the rest of the table.
    return round(x * K1 * (1 - B + B * length / average), COUNT_DECIMALS)


def _row_length(blob: bytes) -> int:
    """A row's tokens over all columns; every count under 128 is one byte, so the bytes' sum is the sum."""
    return sum(blob) if not blob or max(blob) < 0x80 else sum(_varints(blob))


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (FTS5's ``_docsize`` record: one token count per column)."""
    values, value, count = [], 0, 0
    for byte in blob:
        count += 1
        if count == 9:  # the ninth byte contributes all eight bits
            values.append((value << 8) | byte)
            value, count = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            values.append((value << 7) | byte)
            value, count = 0, 0
    return values
