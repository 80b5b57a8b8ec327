"""The time a question is about: "on 16 November, 2023", "in May", "last week", "vor zwei Tagen", "۳ روز پیش".

A search whose query names a time ranks messages of that time higher (``search.hybrid``); a fact naming a
past time is stored with the day it meant (``memory.facts.dates``). Relative expressions are resolved
against ``now``, the date of the message asking, so a question read from the archive later means what it
meant when it was asked. One set of steps (dates, months, years, days, "N ago", periods, weekdays) reads
every language's word tables (``time_words``, ``time_words_en``) on a folded text: English and dates in
digits first and on the whole text, then the ten other languages keyword search stems on its start. Which
words count, and the measurements behind these choices: docs/memory.md.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache, partial
from itertools import count
from typing import Any

from teleton.memory.search import time_words, time_words_en
from teleton.memory.search.calendars import GREGORIAN, SOLAR_HIJRI, Calendar, Span
from teleton.text.language import detect_language

OTHER_LANGUAGES_CHARS = 2_000  # a long paste is not a question: its start is enough
_GROUPS = (time_words_en.ENGLISH, time_words.LANGUAGES)  # read in this order; English on the whole text


@dataclass(frozen=True)
class TimeRange:
    start: float  # epoch seconds, inclusive
    end: float  # exclusive


def query_time_range(text: str, now: float | None = None) -> TimeRange | None:
    """The period ``text`` names, relative to ``now`` (default: the current time), or None. The first
    expression found wins; English expressions before those of other languages."""
    today = _midnight(time.time() if now is None else now)
    try:
        for tables, read, folded in _readings(text):
            if found := _dates_named(folded, today, tables) or _relative_named(read, folded, today, tables.languages):
                return _as_range(found)
    except (ValueError, OverflowError):  # a time no calendar holds ("May 0000", "December 9999"): no period
        return None
    return None


def past_time_range(text: str, now: float) -> TimeRange | None:
    """The period ``text`` names with words that can only mean a time before ``now`` or that very day
    ("yesterday", "3 days ago", "last week", "last Friday", "today"), resolved against ``now``. None for dates,
    months and years (absolute, or a birthday's "8 May" that recurs) and for words a plan may mean ("on
    Friday", "this month"): what a stored fact may safely be dated by (``memory.facts.dates``)."""
    today = _midnight(now)
    try:
        for tables, read, folded in _readings(text):
            if found := _relative_named(read, folded, today, tables.languages, plans=False):
                return _as_range(found)
    except (ValueError, OverflowError):  # "99999999 days ago": before any date
        return None
    return None


def _readings(text: str) -> Iterator[tuple[_Tables, str, str]]:
    """Each group of tables (compiled when first needed) with the text it reads, as written and folded."""
    folded = fold(text)
    yield _tables(0), text, folded
    head = text[:OTHER_LANGUAGES_CHARS]
    yield _tables(1), head, folded if head == text else fold(head)


def _midnight(moment: float) -> datetime:
    """The start of the (local) day of ``moment``: what relative expressions count from."""
    return datetime.fromtimestamp(moment).replace(hour=0, minute=0, second=0, microsecond=0)


def _as_range(found: Span | None) -> TimeRange | None:
    return TimeRange(found[0].timestamp(), found[1].timestamp()) if found else None


def _ago(days: int, today: datetime) -> Span:
    middle = today - timedelta(days=days)
    slack = timedelta(days=max(1, days // 7))  # "3 weeks ago" is vaguer than "3 days ago"
    return middle - slack, middle + slack + timedelta(days=1)


def _last_weekday(weekday: int, today: datetime) -> Span:
    """The last such day before today (Monday = 0)."""
    start = today - timedelta(days=(today.weekday() - weekday) % 7 or 7)
    return start, start + timedelta(days=1)


def _named_period(
    which: str, unit: str, today: datetime, calendar: Calendar | None = None, week_start: int = 0
) -> Span:
    calendar = calendar or GREGORIAN
    if unit == "weekend":
        back = (today.weekday() - (week_start - 2) % 7) % 7 or 7  # the last Saturday before today
        start = today - timedelta(days=back)
        return start, start + timedelta(days=2)
    if unit == "week":
        monday = today - timedelta(days=(today.weekday() - week_start) % 7)
        return (monday, today + timedelta(days=1)) if which == "this" else (monday - timedelta(days=7), monday)
    if unit == "month":
        first = calendar.month(*calendar.month_of(today))[0]
        if which == "this":
            return first, today + timedelta(days=1)
        return calendar.month(*calendar.month_of(first - timedelta(days=1)))
    year = calendar.month_of(today)[0]
    first = calendar.month(year, 1)[0]
    return (first, today + timedelta(days=1)) if which == "this" else (calendar.month(year - 1, 1)[0], first)


_FOLD = str.maketrans(
    {"ı": "i", "ي": "ی", "ى": "ی", "ك": "ک", "ة": "ه", "ـ": "", "\u200c": " ", "’": "'", "ʼ": "'", "‘": "'", "`": "'"}
    | {chr(0x06F0 + d): str(d) for d in range(10)}  # Persian digits
    | {chr(0x0660 + d): str(d) for d in range(10)}  # Arabic-Indic digits
)
_SPACES = re.compile(r"\s+")
_SLOT = re.compile(r"\{([a-z]+)\}")


def fold(text: str) -> str:
    """``text`` lower-case, without accents or Arabic marks, one letter for each of Persian's and Arabic's
    variants, ASCII digits, one space between words: how ``time_words`` is matched."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    return _SPACES.sub(" ", "".join(c for c in decomposed if not unicodedata.combining(c)).translate(_FOLD))


Lookup = list[tuple[re.Pattern[str], Any]]  # forms -> what they mean


def _lookup(table: Lookup, found: str) -> Any:
    return next(value for pattern, value in table if pattern.fullmatch(found))


def _table(entries: dict[str, Any] | tuple[str, ...], start: int = 0) -> Lookup:
    items = entries.items() if isinstance(entries, dict) else ((f, i) for i, f in enumerate(entries, start))
    return [(re.compile(fold(forms)), value) for forms, value in items if forms]


def _forms(table: Lookup, leave_out: str = "") -> str:
    """The table's forms as one alternation, longest first: "hafta sonu" before "hafta"."""
    out = set(fold(leave_out).split("|"))
    forms = {f for pattern, _ in table for f in pattern.pattern.split("|") if f not in out}
    return "|".join(sorted(forms, key=lambda f: (-len(f), f)))


def _compile(templates: tuple[str, ...], **slots: str) -> re.Pattern[str] | None:
    """One pattern for ``templates``; each slot ``{name}`` becomes a group ``name<n>``, n counting them."""
    numbers = count()

    def group(slot: re.Match[str]) -> str:
        return f"(?P<{slot[1]}{next(numbers)}>{slots[slot[1]]})" if slot[1] in slots else slot[0]

    # fold lower-cases a template's own named groups, "(?P<year>...)", too
    parts = [_SLOT.sub(group, fold(template).replace("(?p<", "(?P<")) for template in templates]
    return re.compile(rf"(?<!\w)(?:{'|'.join(parts)})(?!\w)") if parts else None


def _slot(found: re.Match[str], *names: str) -> str:
    values = found.groupdict().items()
    return next((v for k, v in values if v is not None and k.rstrip("0123456789") in names), "")


@dataclass(frozen=True)
class _Language:
    code: str
    calendar: Calendar
    period_calendar: Calendar  # of "this month", "last year"
    week_start: int  # Monday = 0; Persian weeks start on Saturday
    months: Lookup
    month_alone: re.Pattern[str] | None
    year_alone: re.Pattern[str] | None
    days: Lookup
    said_days: re.Pattern[str] | None
    detected_days: re.Pattern[str] | None  # count only in a text detected as this language
    numbers: Lookup
    units: Lookup
    ago: re.Pattern[str] | None
    period_units: Lookup
    period_which: Lookup
    periods: tuple[tuple[str | None, str | None, re.Pattern[str] | None], ...]  # which, unit, if the words say
    weekdays: Lookup
    weekday: re.Pattern[str] | None  # a plan too: "on Friday"
    last_weekday: re.Pattern[str] | None  # only a past one: "last Friday"


def _language(code: str, words: time_words.Words) -> _Language:
    calendar = SOLAR_HIJRI if words.solar_hijri else GREGORIAN
    months, numbers, units = _table(words.months, 1), _table(words.numbers, 1), _table(words.units)
    days, detected, period_units = _table(words.days), _table(words.days_if_detected), _table(words.period_units)
    weekdays, period_which = _table(words.weekdays) + _table(words.weekdays_short), _table(words.period_which)
    alone = _forms(months, f"{words.dated_only}|{words.year_only}")
    units_of, weekday = _forms(period_units), {"day": _forms(weekdays[:7]), "short": _forms(weekdays)}
    return _Language(
        code=code,
        calendar=calendar,
        period_calendar=SOLAR_HIJRI if words.solar_periods else GREGORIAN,
        week_start=5 if words.solar_periods else 0,
        months=months,
        month_alone=_compile(words.month_phrases, month=alone, anymonth=_forms(months)),
        year_alone=_compile(words.year_phrases, year=calendar.years),
        days=days + detected,
        said_days=_compile(tuple(p.pattern for p, _ in days)),
        detected_days=_compile(tuple(p.pattern for p, _ in detected)),
        numbers=numbers,
        units=units,
        ago=_compile(words.ago, n=rf"\d{{1,3}}|{_forms(numbers)}", unit=_forms(units), lone=fold(words.lone_units)),
        period_units=period_units,
        period_which=period_which,
        periods=(
            ("last", None, _compile(words.last_periods, unit=units_of)),
            ("this", None, _compile(words.this_periods, unit=units_of)),
            (None, None, _compile(words.periods, which=_forms(period_which), unit=units_of)),
            *((which, unit, _compile((w,))) for w, (which, unit) in words.period_words.items()),
        ),
        weekdays=weekdays,
        weekday=_compile(words.weekday_phrases + words.last_weekday_phrases, **weekday),
        last_weekday=_compile(words.last_weekday_phrases, **weekday),
    )


@dataclass(frozen=True)
class _Dates:
    """A day's date and a month's, as the languages of one calendar that write them alike do, with their months."""

    calendar: Calendar
    months: Lookup
    days: tuple[re.Pattern[str] | None, ...]  # a day (and a year), the first template found decides
    month_year: re.Pattern[str] | None


def _dated(languages: dict[str, time_words.Words], compiled: list[_Language], day_words: Lookup) -> list[_Dates]:
    """A day and month (and year), and a month and year: one pattern for the languages that write them alike."""
    alike: dict[tuple[Calendar, tuple[str, ...], tuple[str, ...]], Lookup] = {}
    for words, lang in zip(languages.values(), compiled, strict=True):
        alike.setdefault((lang.calendar, words.dates, words.month_years), []).extend(lang.months)
    day = "|".join(filter(None, (r"\d{1,2}", _forms(day_words))))
    dates = []
    for (calendar, templates, month_years), months in alike.items():
        slots = {"day": day, "month": _forms(months), "year": calendar.years}
        days = tuple(_compile((template,), **slots) for template in templates)
        dates.append(_Dates(calendar, months, days, _compile(month_years, **slots)))
    return dates


@dataclass(frozen=True)
class _Tables:
    languages: list[_Language]
    day_words: Lookup  # "восьмого" (мая), of every language
    year_only: set[str]
    dated: list[_Dates]


@lru_cache(maxsize=len(_GROUPS))
def _tables(group: int) -> _Tables:
    """A group of word tables compiled, when a text first needs them (most questions need no other language's)."""
    words = _GROUPS[group]
    languages = [_language(code, w) for code, w in words.items()]
    day_words = [entry for lang in words.values() for entry in _table(lang.day_words, 1)]
    year_only = {f for lang in words.values() for f in fold(lang.year_only).split("|") if f}
    return _Tables(languages, day_words, year_only, _dated(words, languages, day_words))


def _last_of(calendar: Calendar, span_in: Callable[[int], Span | None], today: datetime) -> Span | None:
    """The period ``span_in(year)`` names in this year of ``calendar``, or in the last if it is still ahead."""
    span = span_in(calendar.month_of(today)[0])
    return span_in(calendar.month_of(today)[0] - 1) if span and span[0] > today else span


def _number(found: str, table: Lookup) -> int:
    return int(found) if found.isdigit() else int(_lookup(table, found))


def _dates_named(folded: str, today: datetime, tables: _Tables) -> Span | None:
    found: re.Match[str] | None
    for dated in tables.dated:
        for pattern in dated.days:
            matches = pattern.finditer(folded) if pattern else iter(())
            standing = (m for m in matches if _slot(m, "year") or _slot(m, "month") not in tables.year_only)
            if not (found := next(standing, None)):
                continue
            day, month = _number(_slot(found, "day"), tables.day_words), _number(_slot(found, "month"), dated.months)
            if year := _slot(found, "year"):
                span = dated.calendar.day(int(year), month, day)  # None: "31 февраля 2023" is its month
            else:
                span = _last_of(dated.calendar, partial(dated.calendar.day, month=month, day=day), today)
            if span:
                return span
            break
    for dated in tables.dated:
        if found := dated.month_year and dated.month_year.search(folded):
            return dated.calendar.month(int(_slot(found, "year")), _number(_slot(found, "month"), dated.months))
    for lang in tables.languages:
        if found := lang.month_alone and lang.month_alone.search(folded):
            month = _lookup(lang.months, _slot(found, "month", "anymonth"))
            return _last_of(lang.calendar, partial(lang.calendar.month, month=month), today)
    for lang in tables.languages:
        if found := lang.year_alone and lang.year_alone.search(folded):
            whole = int(_slot(found, "year"))
            return lang.calendar.month(whole, 1)[0], lang.calendar.month(whole + 1, 1)[0]
    return None


def _relative_named(
    text: str, folded: str, today: datetime, languages: list[_Language], *, plans: bool = True
) -> Span | None:
    """``plans`` False: not the words a plan may use ("this week", "on Friday"; ``past_time_range``)."""
    for lang in languages:
        found = lang.said_days and lang.said_days.search(folded)
        if not found and lang.detected_days and (found := lang.detected_days.search(folded)):
            found = found if detect_language(text) == lang.code else None
        if found:
            start = today - timedelta(days=_lookup(lang.days, found[0]))
            return start, start + timedelta(days=1)
    for lang in languages:
        if found := lang.ago and lang.ago.search(folded):
            lone, number = _slot(found, "lone"), _slot(found, "n")
            times = 1 if lone or not number else _number(number, lang.numbers)
            return _ago(times * _lookup(lang.units, lone or _slot(found, "unit")), today)
    for lang in languages:
        for which, unit, pattern in lang.periods:
            for found in pattern.finditer(folded) if pattern and (plans or which != "this") else ():
                said = which or _lookup(lang.period_which, _slot(found, "which"))
                if plans or said != "this":
                    unit = unit or _lookup(lang.period_units, _slot(found, "unit"))
                    return _named_period(said, unit, today, lang.period_calendar, lang.week_start)
    for lang in languages:  # "в пятницу", "am Freitag", "on Friday" may be the next one: not without plans
        if found := (pattern := lang.weekday if plans else lang.last_weekday) and pattern.search(folded):
            return _last_weekday(_lookup(lang.weekdays, _slot(found, "day", "short")), today)
    return None
