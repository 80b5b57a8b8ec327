"""Text files and CSV tables: decoding whatever encoding they came in, and tables as self-contained lines.

Plain and synchronous, like the rest of ``teleton.media.documents``: the caller runs them in a thread.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import re
import unicodedata
from collections import Counter

from teleton.media.extracted import ExtractedDocument

MAX_ROWS = 10_000
# Byte-order marks, longest first: the UTF-32 LE mark starts with the UTF-16 LE one.
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
# Legacy encodings tried when the bytes are not UTF-8, in order of preference on a tie: Telegram has many
# Russian users (Windows cp1251, older KOI8-R and DOS cp866 files), then Western Windows and Latin-1.
_LEGACY = ("cp1251", "cp1252", "koi8_r", "cp866", "latin-1")
_SAMPLE_BYTES = 65_536
_WORD = re.compile(r"[^\W\d_]+")
_DELIMITERS = (",", ";", "\t", "|")


def plain_text(data: bytes, *, max_chars: int) -> ExtractedDocument:
    text, truncated = decode_text(data, max_chars=max_chars)
    return ExtractedDocument("text", text, None, truncated)


def decode_text(data: bytes, *, max_chars: int) -> tuple[str, bool]:
    """Decode at most what ``max_chars`` characters can take; returns (text, truncated)."""
    bom, encoding = next(((bom, enc) for bom, enc in _BOMS if data.startswith(bom)), (b"", ""))
    # No encoding spends more than 4 bytes on a character, so this prefix holds max_chars + 1 of them.
    prefix = data[len(bom) : len(bom) + max_chars * 4 + 4]
    more = len(bom) + len(prefix) < len(data)
    encoding = encoding or _guess_encoding(prefix)
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    # final=False when the prefix stops early, so a character cut in half at its end is not reported as garbage.
    text = decoder.decode(prefix, final=not more)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    truncated = more or len(text) > max_chars
    return text[:max_chars], truncated


def _guess_encoding(data: bytes) -> str:
    sample = data[:_SAMPLE_BYTES]
    utf8 = sample.decode("utf-8", errors="replace")
    bad = utf8.count("\ufffd")
    if not bad or _utf8_with_few_errors(utf8, bad, cut=len(sample) < len(data)):
        return "utf-8"
    best, best_score = "latin-1", None
    for encoding in _LEGACY:
        try:
            candidate = sample.decode(encoding)
        except UnicodeDecodeError:
            continue  # bytes this code page leaves undefined: not written in it
        score = _plausibility(candidate)
        if best_score is None or score > best_score:
            best, best_score = encoding, score
    return best


def _utf8_with_few_errors(text: str, bad: int, *, cut: bool) -> bool:
    # A UTF-8 log with one stray byte is still UTF-8; cp1251 read as UTF-8 is almost nothing but errors.
    if cut:
        bad -= 1  # the sample may end inside a character
    good = sum(1 for ch in text if ord(ch) > 127 and ch != "\ufffd")
    return bad <= 0 or good >= 20 * bad


def _plausibility(text: str) -> int:
    """How much ``text`` looks like words of a real language; mis-decoded text mixes scripts and cases."""
    score = 0
    for word in _WORD.findall(text):
        if word.isascii():
            continue  # the same in every candidate encoding
        cyrillic = sum(1 for ch in word if "\u0400" <= ch <= "\u04ff")
        ascii_letters = sum(1 for ch in word if ch.isascii())
        if cyrillic:
            if cyrillic < len(word):
                score -= len(word)  # "cafй": Latin and Cyrillic in one word is a wrong code page
            elif word.islower() or (word[0].isupper() and word[1:].islower()):
                score += len(word)
            elif not word.isupper():
                score -= len(word)  # "рТЙЧЕФ": KOI8-R read as cp1251 flips the case of letters
        elif ascii_letters:
            score += len(word)  # "café", "Müller"
        elif len(word) > 2:
            score -= len(word)  # "Ïðèâåò": no language writes long words of accented letters only
    controls = sum(1 for ch in text if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r\f")
    return score - 3 * controls


# -- CSV -------------------------------------------------------------------------------------------------


def csv_text(
    data: bytes, *, max_chars: int, tab_separated: bool = False, max_rows: int = MAX_ROWS
) -> ExtractedDocument:
    """Each row becomes one line naming its columns, so any excerpt of the table stands on its own:
    ``[row 2] date: 2024-01-03 | amount: 12.50 | payee: Lenta``.
    """
    source, truncated = decode_text(data, max_chars=max_chars)
    delimiter = "\t" if tab_separated else _delimiter(source)
    lines: list[str] = []
    size = 0
    note = None
    try:
        rows = csv.reader(io.StringIO(source, newline=""), delimiter=delimiter)
        header = [cell.strip() for cell in next(rows, [])]
        names = [name or f"column {n}" for n, name in enumerate(header, 1)]
        if len(names) > 1:
            lines.append("columns: " + " | ".join(names))
        for number, row in enumerate(rows, 2):
            if number - 1 > max_rows:
                truncated, note = True, f"only the first {max_rows} rows were read"
                break
            line = _row_line(number, row, names)
            if line is None:
                continue
            if size + len(line) + 1 > max_chars:
                truncated = True
                break
            lines.append(line)
            size += len(line) + 1
    except csv.Error:
        # A malformed table (a quote never closed, a cell over the field limit) is still readable as text.
        return ExtractedDocument("csv", source, None, truncated, note="not a well-formed table: shown as text")
    if len(names) <= 1:
        return ExtractedDocument("csv", source, None, truncated)
    return ExtractedDocument("csv", "\n".join(lines), None, truncated, note=note)


def _row_line(number: int, row: list[str], names: list[str]) -> str | None:
    pairs = []
    for n, (name, value) in enumerate(itertools.zip_longest(names, row), 1):
        value = (value or "").strip()
        if value:
            pairs.append(f"{name or f'column {n}'}: {value}")
    return f"[row {number}] " + " | ".join(pairs) if pairs else None


def _delimiter(text: str) -> str:
    """The delimiter that splits the first rows into the same number of columns most often, widest first."""
    sample = "\n".join(text.split("\n", 50)[:50])
    best, best_key = ",", (0, 0)
    for delimiter in _DELIMITERS:
        try:
            widths = [len(row) for row in csv.reader(io.StringIO(sample, newline=""), delimiter=delimiter) if row]
        except csv.Error:
            continue
        if not widths:
            continue
        width, count = Counter(widths).most_common(1)[0]
        key = (count, width) if width > 1 else (0, 0)
        if key > best_key:
            best, best_key = delimiter, key
    return best
