"""The calendars a question's dates are read in: the Gregorian one, and Iran's Solar Hijri (``time_ranges``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

Span = tuple[datetime, datetime]  # start inclusive, end exclusive


def day_span(year: int, month: int, day: int) -> Span | None:
    try:
        start = datetime(year, month, day)
    except ValueError:
        return None
    return start, start + timedelta(days=1)


def month_span(year: int, month: int) -> Span:
    start = datetime(year, month, 1)
    return start, (start + timedelta(days=32)).replace(day=1)


class Calendar:
    """The Gregorian calendar; ``_SolarHijri`` overrides it."""

    years = r"(?:19|20)\d\d"  # how a year of this calendar is written

    def month_of(self, day: datetime) -> tuple[int, int]:
        return day.year, day.month

    def month(self, year: int, month: int) -> Span:
        return month_span(year, month)

    def day(self, year: int, month: int, day: int) -> Span | None:
        return day_span(year, month, day)


class _SolarHijri(Calendar):
    """Iran's calendar: the year starts at the March equinox (1 Farvardin 1403 = 20 March 2024), six months
    of 31 days, five of 30, then 29 or 30; leap years by the 33-year rule, right for 1343-1472."""

    years = r"1[34]\d\d"

    @staticmethod
    @lru_cache(maxsize=64)
    def start(year: int) -> datetime:
        day, known = datetime(2024, 3, 20), 1403
        for y in range(known, year):
            day += timedelta(days=365 + (y % 33 in _SOLAR_LEAP))
        for y in range(year, known):
            day -= timedelta(days=365 + (y % 33 in _SOLAR_LEAP))
        return day

    def month_of(self, day: datetime) -> tuple[int, int]:
        year = day.year - 621 if day >= self.start(day.year - 621) else day.year - 622
        offset = (day - self.start(year)).days
        return year, (offset // 31 + 1 if offset < 186 else min(12, 7 + (offset - 186) // 30))

    def month(self, year: int, month: int) -> Span:
        def first(m: int) -> timedelta:
            return timedelta(days=(m - 1) * 31 if m <= 7 else 186 + (m - 7) * 30)

        end = self.start(year + 1) if month == 12 else self.start(year) + first(month + 1)
        return self.start(year) + first(month), end

    def day(self, year: int, month: int, day: int) -> Span | None:
        start, end = self.month(year, month)
        start += timedelta(days=day - 1)
        return (start, start + timedelta(days=1)) if 1 <= day and start < end else None


_SOLAR_LEAP = {1, 5, 9, 13, 17, 22, 26, 30}
GREGORIAN, SOLAR_HIJRI = Calendar(), _SolarHijri()
