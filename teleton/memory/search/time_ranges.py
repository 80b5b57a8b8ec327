"""The time a question is about: "on 16 November, 2023", "in May", "last week", "yesterday", "3 days ago".

A search whose query names a time ranks messages of that time higher (``search.hybrid``). Relative
expressions are resolved against ``now``: the date of the message asking, so a question read from the
archive later means what it meant when it was asked. English expressions and ISO / dotted numeric dates are
understood; a text naming none returns None and the search is unchanged.

`dateparser` was measured for this and left out: 80-170 ms a query, no ranges ("in May" is May 1), and
dates found in ordinary words ("did", "on", "May I").
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

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
    expression found wins."""
    today = datetime.fromtimestamp(time.time() if now is None else now).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    lowered = text.lower()
    for parse in (_full_date, _numeric_date, _month_and_year, _month_alone, _year_alone, _relative):
        found = parse(lowered, today)
        if found is not None:
            start, end = found
            return TimeRange(start.timestamp(), end.timestamp())
    return None


Span = tuple[datetime, datetime]


def _day(year: int, month: int, day: int) -> Span | None:
    try:
        start = datetime(year, month, day)
    except ValueError:
        return None
    return start, start + timedelta(days=1)


def _month(year: int, month: int) -> Span:
    start = datetime(year, month, 1)
    return start, (start + timedelta(days=32)).replace(day=1)


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


def _relative(text: str, today: datetime) -> Span | None:
    if re.search(r"\btoday\b|\bthis morning\b|\btonight\b", text):
        return today, today + timedelta(days=1)
    if re.search(r"\byesterday\b", text):
        return today - timedelta(days=1), today
    found = re.search(r"\b(\d{1,3}|a|an|one|two|three|four|five|six) (days?|weeks?|months?|years?) ago\b", text)
    if found:
        count = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}.get(found[1])
        days = (count or int(found[1])) * _UNITS[found[2]]
        middle = today - timedelta(days=days)
        slack = timedelta(days=max(1, days // 7))  # "3 weeks ago" is vaguer than "3 days ago"
        return middle - slack, middle + slack + timedelta(days=1)
    found = re.search(r"\b(last|this|past) (weekend|week|month|year)\b", text)
    if found:
        return _named_period(found[1], found[2], today)
    found = re.search(rf"\b(?:last|on|this past) ({'|'.join(WEEKDAYS)})\b", text)
    if found:
        back = (today.weekday() - WEEKDAYS.index(found[1])) % 7 or 7
        start = today - timedelta(days=back)
        return start, start + timedelta(days=1)
    return None


def _named_period(which: str, unit: str, today: datetime) -> Span:
    if unit == "weekend":
        back = (today.weekday() - 5) % 7 or 7  # the last Saturday before today
        start = today - timedelta(days=back)
        return start, start + timedelta(days=2)
    if unit == "week":
        monday = today - timedelta(days=today.weekday())
        return (monday, today + timedelta(days=1)) if which == "this" else (monday - timedelta(days=7), monday)
    if unit == "month":
        first = today.replace(day=1)
        if which == "this":
            return first, today + timedelta(days=1)
        previous = first - timedelta(days=1)
        return _month(previous.year, previous.month)
    first = today.replace(month=1, day=1)
    return (first, today + timedelta(days=1)) if which == "this" else (first.replace(year=first.year - 1), first)
