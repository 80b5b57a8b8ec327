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

import numpy as np

from teleton.memory.search.fts_query import or_expression
from teleton.storage.sqlite_driver import Connection

K1 = 1.2
B = 0.75
COUNT_DECIMALS = 4  # of a weighted count read back from bm25() (see _weighted_counts)
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
    rows = search.rows()
    if scope.only is None and rows <= HIGHLIGHT_MAX_ROWS and rows * len(terms) <= max_matches:
        # A small scope: no word can be dropped and each word's matches are all its rows, so one query per
        # word finds both (a stem prefix costs 1-3 ms a query at 1M messages, whatever the scope's size).
        found = word_counts(search, dict.fromkeys(terms, rows), weights, max_matches)
        counts = {term: len(ids) for term, (ids, _) in found.items()}
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
    # Every (row, word) pair at once, the words in the query's order: a row's score adds its words' parts in
    # that order, as a loop over them would, to the last bit. A big chat's common words match a thousand rows
    # or more, and row by row in Python that cost as much as the statements.
    found = found or word_counts(search, {term: counts[term] for term in kept}, weights, max_matches)
    matched = [found[term] for term in kept]
    ids = np.concatenate([m[0] for m in matched])
    if not len(ids):
        return {}
    tf = np.concatenate([m[1] for m in matched])
    weight = np.concatenate([np.full(len(m[0]), idf[term]) for term, m in zip(kept, matched, strict=True)])
    row_ids, which = np.unique(ids, return_inverse=True)
    listed = row_ids.tolist()
    known = search.lengths(listed)
    length = np.array([known.get(i, 0) for i in listed], np.float64)
    average = search.average_length()
    norm = K1 * (1 - B + B * length / average) if average > 0 else np.full(len(row_ids), K1)
    scores = np.bincount(which, weights=weight * tf * (K1 + 1) / (tf + norm[which]), minlength=len(row_ids))
    best = np.lexsort((row_ids, -scores))[:limit]  # the best first, ties by row id
    return dict(zip(row_ids[best].tolist(), scores[best].tolist(), strict=True))


def term_counts(
    conn: Connection, *, fts: str, table: str, scope: Scope, terms: Sequence[str], cap: int
) -> dict[str, int]:
    """Rows of ``scope`` (``Scope()``: the whole table) matching each term, counted up to ``cap``: past it
    a term's exact count decides nothing (see ``drop_common_terms``) and would cost more than the search."""
    search = _Search(conn, fts, table, scope)
    return dict(zip(terms, search.counts([_phrase(term) for term in terms], cap), strict=True))


def _phrase(term: str) -> str:
    return or_expression([term])


def word_counts(
    search: _Search, matches: dict[str, int], weights: Sequence[float], newest: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Term -> row ids and column-weighted counts of its matches, for the ``newest`` scope rows it matches
    (``matches``: how many it does, as ``term_counts`` counted, or at most that many); one statement for all.

    ``bm25()`` sums a score per phrase of the MATCH, so a term of several stem prefixes (``keyword_terms``)
    is counted one prefix at a time; a prefix that extends another one matches nothing the shorter one does
    not, and is left out so no word counts twice.
    """
    large = search.table_rows() > HIGHLIGHT_MIN_TABLE_ROWS
    arms = [(term, phrase) for term in matches for phrase in _prefix_phrases(term)]
    marks = [large and matches[term] <= HIGHLIGHT_MAX_ROWS for term, _ in arms]
    arm, ids, counts = search.frequencies([phrase for _, phrase in arms], weights, newest, marks)
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for n, (term, _) in enumerate(arms):
        mine = arm == n
        if term not in found:
            found[term] = ids[mine], counts[mine]
            continue
        # A second prefix of the word: each row's counts of both, the newest rows kept.
        row_ids, which = np.unique(np.concatenate([found[term][0], ids[mine]]), return_inverse=True)
        summed = np.bincount(which, weights=np.concatenate([found[term][1], counts[mine]]), minlength=len(row_ids))
        found[term] = row_ids[::-1][:newest], summed[::-1][:newest]
    return found


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

    def rows(self) -> int:
        """The scope's rows (the statistics' N)."""
        sql, args, _ = self._from(None)
        return int(self.conn.execute(f"select count(*) {sql}", args).fetchone()[0])

    def counts(self, expressions: Sequence[str], cap: int) -> list[int]:
        """The scope's rows matching each expression, each counted up to ``cap``, in one statement."""
        if not expressions:
            return []
        parts, args = [], []
        for expression in expressions:
            sql, part_args, _ = self._from(expression)
            parts.append(f"(select count(*) from (select 1 {sql} limit ?))")
            args += [*part_args, cap]
        return [int(n) for n in self.conn.execute(f"select {', '.join(parts)}", args).fetchone()]

    def frequencies(
        self, phrases: Sequence[str], weights: Sequence[float], newest: int, marks: Sequence[bool]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each of ``phrases`` (numbered by their place), its ``newest`` scope rows matching it: the phrase's
        number, the row id and the row's column-weighted match count, in one statement (a part per phrase).

        With ``marks`` (per phrase), a short row's count in a column is the length ``highlight()`` adds to it,
        one marker per match (a marker character the text already holds cancels out: it cannot make a row
        look more relevant; counted in SQL, the text never comes to Python: a quarter of the time per row). A
        long row's comes from bm25(): FTS5's score of a row is ``idf * f * (K1 + 1) / (f + k)`` with ``f`` the
        weighted count and ``k`` from the row's length and the table's average; the same row with doubled
        weights gives ``2f``, and the two scores give ``x = f / k``. ``k`` is computed as FTS5 computes it,
        from the table's totals (its averages record, read in the same statement, so from the same snapshot)
        and the row's ``_docsize``. CASE evaluates only its taken branch, so a part of short rows never calls
        bm25(). Scope phrases (the feed's chat token) sit in a column of weight 0 and add nothing.
        """
        fts = self.fts
        names = self.columns()
        weighted = [(names[i], w) for i, w in enumerate(weights) if w]
        size = " + ".join(f"coalesce(length(cast({fts}.{name} as blob)), 0)" for name, _ in weighted)
        single = ", ".join(str(float(w)) for w in weights)
        double = ", ".join(str(2 * float(w)) for w in weights)
        added = [
            f"length(highlight({fts}, {names.index(name)}, char(1), '')) - length({fts}.{name})" for name, _ in weighted
        ]
        parts, args = [], []
        for n, (phrase, marked) in enumerate(zip(phrases, marks, strict=True)):
            short = f"({size}) <= {SHORT_ROW_BYTES}" if marked else "0"
            marked_columns = ", ".join(f"iif({short}, coalesce({a}, 0), 0)" for a in added)
            sql, part_args, row_id = self._from(phrase, ranked=True)
            parts.append(
                f"select * from (select {n}, {row_id}, (select sz from {fts}_docsize where id = {row_id}), {short}, "
                f"iif({short}, 0, bm25({fts}, {single})), iif({short}, 0, bm25({fts}, {double})), "
                f"(select block from {fts}_data where id = 1), {marked_columns} {sql} order by {row_id} desc limit ?)"
            )
            args += [*part_args, newest]
        rows = self.conn.execute(" union all ".join(parts), args).fetchall() if parts else []
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        arm, ids, sizes, shorts, singles, doubles, blocks, *columns = zip(*rows, strict=True)
        table_rows, *column_tokens = _varints(blocks[0])
        length = _row_lengths(sizes, len(names))
        self._lengths.update(zip(ids, length.tolist(), strict=True))
        average = sum(column_tokens) / table_rows
        count = _weighted_counts(np.array(singles, np.float64), np.array(doubles, np.float64), length, average)
        if any(marks):  # short rows: highlight()'s markers
            marked_count = np.zeros(len(ids))
            for column, (_, w) in zip(columns, weighted, strict=True):
                marked_count = marked_count + w * np.array(column, np.float64)
            count = np.where(np.array(shorts, bool), marked_count, count)
        return np.array(arm, np.int64), np.array(ids, np.int64), count

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


def _weighted_counts(single: np.ndarray, double: np.ndarray, length: np.ndarray, average: float) -> np.ndarray:
    """``f`` of each row from bm25() with the weights once (``single``) and doubled (see ``_Search.frequencies``);
    0 for a row matched in columns of weight 0 only."""
    valid = (single != 0) & (double != 0) & (length != 0)
    ratio = np.divide(double, single, out=np.full(len(single), 1.5), where=valid)  # = 2 (x + 1) / (2x + 1)
    x = (2.0 - ratio) / (2.0 * (ratio - 1.0))
    # f is whole counts times weights of a decimal place or two: rounding drops the float noise of the
    # inversion, so a row's count never depends on the rest of the table.
    f = np.round(x * K1 * (1 - B + B * length / average), COUNT_DECIMALS)
    return np.where(valid, f, 0.0)


def _row_lengths(sizes: Sequence[bytes | None], columns: int) -> np.ndarray:
    """Each row's tokens from its ``_docsize`` record: when every count is under 128 a record is one byte a
    column, and the records joined are a matrix of them."""
    if None not in sizes:
        joined = np.frombuffer(b"".join(sizes), np.uint8)  # type: ignore[arg-type]
        if len(joined) == len(sizes) * columns and not (joined & 0x80).any():
            return joined.reshape(len(sizes), columns).sum(axis=1, dtype=np.int64)
    return np.array([_row_length(s) if s else 0 for s in sizes], np.int64)


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
