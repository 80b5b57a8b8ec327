"""A fact says when, for good: "ran a charity race last Saturday" is stored with the day it meant.

A fact is read months after the exchange it came from, when "last Saturday" means another day. So a fact
whose words name a time that can only be before the exchange or its very day ("yesterday", "last week", "3
days ago", "last Saturday", "today", in every language ``time_ranges`` reads: ``past_time_range``) gets the
period written after it, resolved against the exchange's date: "... last Saturday (20 May 2023)". The date is
then part of the fact's keys, so "what did Melanie do on 20 May?" finds it, and the model reading it knows
the day. Left as written: a fact naming a date, a month or a year (absolute, or recurring: a birthday "on 8
May"), words a plan may use ("on Friday", "this month": the next one, perhaps), or no time at all.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from teleton.memory.search.time_ranges import TimeRange, past_time_range

_VAGUE_DAYS = 45  # a longer period that is not a month or a year ("3 years ago" spans months) is told roughly


def dated(text: str, said_at: float | None) -> str:
    """``text`` with the period its relative time expression meant at ``said_at`` after it (unchanged when
    it has none, names an absolute one, or ``said_at`` is unknown)."""
    when = past_time_range(text, said_at) if said_at is not None else None
    if when is None:
        return text
    body = text.rstrip()
    stop = body[-1] if body and body[-1] in ".!。" else ""
    return f"{body[: len(body) - len(stop)]} ({period_words(when)}){stop}"


def period_words(when: TimeRange) -> str:
    """A period in plain words: a day, a month, a year, a few days ("15-21 May 2023"), or about when a vague
    one ("three years ago") lies."""
    start = datetime.fromtimestamp(when.start)
    last = datetime.fromtimestamp(when.end) - timedelta(seconds=1)
    whole_months = start.day == 1 and (last + timedelta(seconds=1)).day == 1
    if start.date() == last.date():
        return f"{start.day} {start:%B %Y}"
    if whole_months and (start.month, last.month, start.year) == (1, 12, last.year):
        return f"{start.year}"
    if whole_months and (start.year, start.month) == (last.year, last.month):
        return f"{start:%B %Y}"
    if (last - start).days > _VAGUE_DAYS:
        return f"around {datetime.fromtimestamp((when.start + when.end) / 2):%B %Y}"
    if (start.year, start.month) == (last.year, last.month):
        return f"{start.day}-{last.day} {start:%B %Y}"
    return f"{start.day} {start:%B %Y} - {last.day} {last:%B %Y}"
