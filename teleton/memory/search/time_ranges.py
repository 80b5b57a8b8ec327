"""The time a question is about: "on 16 November, 2023", "in May", "last week", "yesterday", "3 days ago".

A search whose query names a time ranks messages of that time higher (``search.hybrid``). Relative
expressions are resolved against ``now``: the date of the message asking, so a question read from the
archive later means what it meant when it was asked. A text naming none returns None and the search is
unchanged.

Understood: English, ISO / dotted numeric dates, and the ten languages keyword search stems (Russian,
Ukrainian, Spanish, Portuguese, German, French, Italian, Turkish, Persian, Arabic): dates ("8 мая 2023",
"am 8. Mai 2023", "el 8 de mayo de 2023"), months ("в мае", "im Mai", "a maggio", "mayısta", "ماه مه"), a
year, yesterday / the day before / today, "N days, weeks, months, years ago" (digits or the number words
one to ten: "два дня назад", "vor zwei Wochen"), this or last week / weekend / month / year, and the last
such weekday ("в прошлую пятницу", "letzten Freitag", "el viernes pasado"). Persian also in Iran's Solar
Hijri calendar ("۴ فروردین", "اسفند ۱۴۰۲"; its "this month", "last year", and weeks from Saturday).
English is read first and exactly as before; the other languages' words are tables (``time_words``), one
set of steps here reads them all, on a folded text (no accents, one letter for Arabic-script variants).
A word that is also an ordinary word counts only where it cannot be one: "im Mai", not "mit Mai"; "no
mar" is the sea; French "hier" alone only in a French text, German reads it "here" (``time_words``).

Measured on ``scripts/eval_data/multilingual`` (hybrid, R@5 / NDCG@5, before -> after): 4 of its 260
questions name a time (ru 2, uk 1, fa 1; es, pt, de none), Russian 0.733 / 0.537 -> 0.721 / 0.531,
Ukrainian 0.773 / 0.572 -> 0.780 / 0.577, Persian 0.830 / 0.680 -> 0.807 / 0.665, the rest unchanged. Three
of the four name a planned date ("the salary from September", "the visit in August", "stay until 4
Farvardin") talked about weeks before it, where boosting that period's messages ranks the plan lower;
"what had they got by the end of July" is asked of its own time and gains. LoCoMo dev (English) unchanged.
A question costs about 0.1 ms (the tables compile once, 30 ms, at the first question that is not English).

`dateparser` was measured for this and left out: 80-170 ms a query, no ranges ("in May" is May 1), and
dates found in ordinary words ("did", "on", "May I").
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache, partial
from typing import Any

from teleton.memory.search import time_words
from teleton.memory.search.calendars import GREGORIAN, SOLAR_HIJRI, Calendar, Span
from teleton.memory.search.calendars import day_span as _day
from teleton.memory.search.calendars import month_span as _month
from teleton.text.language import detect_language

MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
            ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
            ("october", "oct"), ("november", "nov"), ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}  # fmt: skip
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30, "year": 365, "years": 365}


@dataclass(frozen=True)
class TimeRange:
    start: float  # epoch seconds, inclusive
    end: float  # exclusive


def query_time_range(text: str, now: float | None = None) -> TimeRange | None:
    """The period ``text`` names, relative to ``now`` (default: the current time), or None. The first
    expression found wins; English expressions before those of other languages."""
    today = _midnight(time.time() if now is None else now)
    return _as_range(_english(text.lower(), today) or _other_languages(text[:OTHER_LANGUAGES_CHARS], today))


def past_time_range(text: str, now: float) -> TimeRange | None:
    """The period ``text`` names with words that can only mean a time before ``now`` or that very day
    ("yesterday", "3 days ago", "last week", "last Friday", "today"), resolved against ``now``. None for dates,
    months and years (absolute, or a birthday's "8 May" that recurs) and for words a plan may mean ("on
    Friday", "this month"): what a stored fact may safely be dated by (``memory.facts.dates``)."""
    today, head = _midnight(now), text[:OTHER_LANGUAGES_CHARS]
    languages = _tables().languages
    return _as_range(
        _relative(text.lower(), today, plans=False) or _relative_named(head, fold(head), today, languages, plans=False)
    )


def _midnight(moment: float) -> datetime:
    """The start of the (local) day of ``moment``: what relative expressions count from."""
    return datetime.fromtimestamp(moment).replace(hour=0, minute=0, second=0, microsecond=0)


def _as_range(found: Span | None) -> TimeRange | None:
    return TimeRange(found[0].timestamp(), found[1].timestamp()) if found else None


def _english(lowered: str, today: datetime) -> Span | None:
    for parse in (_full_date, _numeric_date, _month_and_year, _month_alone, _year_alone, _relative):
        found = parse(lowered, today)
        if found is not None:
            return found
    return None


def _full_date(text: str, today: datetime) -> Span | None:
    found = re.search(rf"\b{_DAY} (?:of )?({_MONTH})\.?,? (\d{{4}})\b", text)
    if found:
        return _day(int(found[3]), MONTHS[found[2]], int(found[1]))
    found = re.search(rf"\b({_MONTH})\.? {_DAY},? (\d{{4}})\b", text)
    if found:
        return _day(int(found[3]), MONTHS[found[1]], int(found[2]))
    found = re.search(rf"\b(?:on )?(?:the )?{_DAY} (?:of )?({_MONTH})\b|\bon ({_MONTH}) {_DAY}\b", text)
    if found:
        month, day = (found[2], found[1]) if found[2] else (found[3], found[4])
        span = _day(today.year, MONTHS[month], int(day))
        if span and span[0] > today:  # a date without a year is the last one that has passed
            span = _day(today.year - 1, MONTHS[month], int(day))
        return span
    return None


def _numeric_date(text: str, today: datetime) -> Span | None:
    found = re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", text)
    if found:
        return _day(int(found[1]), int(found[2]), int(found[3]))
    found = re.search(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b", text)
    if found:
        return _day(int(found[3]), int(found[2]), int(found[1]))
    return None


def _month_and_year(text: str, today: datetime) -> Span | None:
    found = re.search(rf"\b({_MONTH}),? (\d{{4}})\b", text)
    return _month(int(found[2]), MONTHS[found[1]]) if found else None


def _month_alone(text: str, today: datetime) -> Span | None:
    # "in may" / "during june": a bare "may" is far more often the verb.
    found = re.search(rf"\b(?:in|during|since|last|this|early|late|mid|of) ({_MONTH})\b", text)
    if not found:
        return None
    month = MONTHS[found[1]]
    year = today.year if month <= today.month else today.year - 1
    return _month(year, month)


def _year_alone(text: str, today: datetime) -> Span | None:
    found = re.search(r"\b(?:in|during|since|of) ((?:19|20)\d\d)\b", text)
    if not found:
        return None
    year = int(found[1])
    return datetime(year, 1, 1), datetime(year + 1, 1, 1)


def _relative(text: str, today: datetime, *, plans: bool = True) -> Span | None:
    """``plans`` False: not the words a plan may use ("this week", "on Friday"; ``past_time_range``)."""
    if re.search(r"\btoday\b|\bthis morning\b|\btonight\b", text):
        return today, today + timedelta(days=1)
    if re.search(r"\byesterday\b", text):
        return today - timedelta(days=1), today
    found = re.search(r"\b(\d{1,3}|a|an|one|two|three|four|five|six) (days?|weeks?|months?|years?) ago\b", text)
    if found:
        count = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}.get(found[1])
        return _ago((count or int(found[1])) * _UNITS[found[2]], today)
    which = "last|this|past" if plans else "last|past"
    found = re.search(rf"\b({which}) (weekend|week|month|year)\b", text)
    if found:
        return _named_period(found[1], found[2], today)
    before = "last|on|this past" if plans else "last|this past"
    found = re.search(rf"\b(?:{before}) ({'|'.join(WEEKDAYS)})\b", text)
    if found:
        return _last_weekday(WEEKDAYS.index(found[1]), today)
    return None


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


# Other languages (``time_words``): the same steps in the same order, on the folded text.


OTHER_LANGUAGES_CHARS = 2_000  # a long paste is not a question: its start is enough
_FOLD = str.maketrans(
    {"ı": "i", "ي": "ی", "ى": "ی", "ك": "ک", "ة": "ه", "ـ": "", "\u200c": " ", "’": "'", "ʼ": "'", "‘": "'", "`": "'"}
    | {chr(0x06F0 + d): str(d) for d in range(10)}  # Persian digits
    | {chr(0x0660 + d): str(d) for d in range(10)}  # Arabic-Indic digits
)
_SPACES = re.compile(r"\s+")


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
    """One pattern for ``templates``; each slot ``{name}`` becomes the group ``name<i>`` of template i."""
    parts = []
    for i, template in enumerate(templates):
        part = fold(template)
        for name, forms in slots.items():
            part = part.replace("{" + name + "}", f"(?P<{name}{i}>{forms})")
        parts.append(part)
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
    periods: tuple[tuple[str, str | None, re.Pattern[str] | None], ...]  # which, its unit if the words say
    weekdays: Lookup
    weekday: re.Pattern[str] | None


def _language(code: str, words: time_words.Words) -> _Language:
    calendar = SOLAR_HIJRI if words.solar_hijri else GREGORIAN
    months, numbers, units = _table(words.months, 1), _table(words.numbers), _table(words.units)
    days, detected, period_units = _table(words.days), _table(words.days_if_detected), _table(words.period_units)
    weekdays = _table(words.weekdays) + _table(words.weekdays_short)
    alone = _forms(months, f"{words.dated_only}|{words.year_only}")
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
        periods=(
            ("last", None, _compile(words.last_periods, unit=_forms(period_units))),
            ("this", None, _compile(words.this_periods, unit=_forms(period_units))),
            *((which, unit, _compile((w,))) for w, (which, unit) in words.period_words.items()),
        ),
        weekdays=weekdays,
        weekday=_compile(words.weekday_phrases, day=_forms(weekdays[:7]), short=_forms(weekdays)),
    )


def _dated(
    calendar: Calendar, languages: list[_Language], day_words: Lookup
) -> tuple[Calendar, Lookup, re.Pattern[str], re.Pattern[str]]:
    """A day and month (and year), and a month and year, in any language writing ``calendar``'s months."""
    months = [entry for lang in languages if lang.calendar is calendar for entry in lang.months]
    year = rf",? (?:de |del |سال |عام )?(?P<year>{calendar.years})"
    day = rf"(?P<day>\d{{1,2}}|{_forms(day_words)})(?:\.|-?(?:го|ого|е)|º|ª|°|er)?"
    return (
        calendar,
        months,
        re.compile(rf"(?<!\w){day} (?:de |of )?(?P<month>{_forms(months)})\.?(?:{year})?(?!\w)"),
        re.compile(rf"(?<!\w)(?P<month>{_forms(months)})\.?{year}(?!\w)"),
    )


@dataclass(frozen=True)
class _Tables:
    languages: list[_Language]
    day_words: Lookup  # "восьмого" (мая), of every language
    year_only: set[str]
    dated: list[tuple[Calendar, Lookup, re.Pattern[str], re.Pattern[str]]]


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    """``time_words`` compiled (30 ms), when the first question that is not English needs them."""
    languages = [_language(code, words) for code, words in time_words.LANGUAGES.items()]
    day_words = _table({w: n for words in time_words.LANGUAGES.values() for w, n in words.day_words.items()})
    year_only = {f for words in time_words.LANGUAGES.values() for f in fold(words.year_only).split("|") if f}
    dated = [_dated(calendar, languages, day_words) for calendar in (GREGORIAN, SOLAR_HIJRI)]
    return _Tables(languages, day_words, year_only, dated)


def _other_languages(text: str, today: datetime) -> Span | None:
    folded, tables = fold(text), _tables()
    return _dates_named(folded, today, tables) or _relative_named(text, folded, today, tables.languages)


def _last_of(calendar: Calendar, span_in: Callable[[int], Span | None], today: datetime) -> Span | None:
    """The period ``span_in(year)`` names in this year of ``calendar``, or in the last if it is still ahead."""
    span = span_in(calendar.month_of(today)[0])
    return span_in(calendar.month_of(today)[0] - 1) if span and span[0] > today else span


def _dates_named(folded: str, today: datetime, tables: _Tables) -> Span | None:
    found: re.Match[str] | None
    for calendar, months, day_month, _ in tables.dated:
        for found in day_month.finditer(folded):
            if found["year"] is None and found["month"] in tables.year_only:
                continue
            day = int(found["day"]) if found["day"].isdigit() else _lookup(tables.day_words, found["day"])
            month = _lookup(months, found["month"])
            if found["year"]:
                span = calendar.day(int(found["year"]), month, day)  # None: "31 февраля 2023" is its month
            else:
                span = _last_of(calendar, partial(calendar.day, month=month, day=day), today)
            if span:
                return span
            break
    for calendar, months, _, month_and_year in tables.dated:
        if found := month_and_year.search(folded):
            return calendar.month(int(found["year"]), _lookup(months, found["month"]))
    for lang in tables.languages:
        if found := lang.month_alone and lang.month_alone.search(folded):
            month = _lookup(lang.months, _slot(found, "month", "anymonth"))
            return _last_of(lang.calendar, partial(lang.calendar.month, month=month), today)
    for lang in tables.languages:
        if found := lang.year_alone and lang.year_alone.search(folded):
            year = int(_slot(found, "year"))
            return lang.calendar.month(year, 1)[0], lang.calendar.month(year + 1, 1)[0]
    return None


def _relative_named(
    text: str, folded: str, today: datetime, languages: list[_Language], *, plans: bool = True
) -> Span | None:
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
            count = 1 if lone or not number else int(number) if number.isdigit() else _lookup(lang.numbers, number)
            return _ago(count * _lookup(lang.units, lone or _slot(found, "unit")), today)
    for lang in languages:
        for which, unit, pattern in lang.periods:
            if which == "this" and not plans:
                continue
            if found := pattern and pattern.search(folded):
                unit = unit or _lookup(lang.period_units, _slot(found, "unit"))
                return _named_period(which, unit, today, lang.period_calendar, lang.week_start)
    for lang in languages if plans else ():  # "в пятницу", "am Freitag": also the next one
        if found := lang.weekday and lang.weekday.search(folded):
            return _last_weekday(_lookup(lang.weekdays, _slot(found, "day", "short")), today)
    return None
