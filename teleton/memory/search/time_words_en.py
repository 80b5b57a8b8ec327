"""English's words for a time, and dates written in digits: the tables ``time_ranges`` reads first, in every text.

The same grammar as the other languages' (``time_words.Words``). English is read before them and on the whole
text, so an English phrase wins over another language's in the same text. A bare "may" is the verb: a month
alone counts after "in", "during", "last"... "Today" wins wherever it stands ("yesterday and today" is
today); of "this week and last month", or "on Monday and last Friday", the first in the text counts.
"""

from __future__ import annotations

from teleton.memory.search.time_words import Words

# fmt: off
ENGLISH: dict[str, Words] = {
    "en": Words(
        months=(
            "january|jan", "february|feb", "march|mar", "april|apr", "may", "june|jun", "july|jul", "august|aug",
            "september|sep|sept", "october|oct", "november|nov", "december|dec",
        ),
        dates=(  # "16 November, 2023", "November 16, 2023", "the 2nd of March", "on March 2"; a year: 4 digits
            r"{day}(?:st|nd|rd|th)? (?:of )?{month}\.?,? (?P<year>\d{4})",
            r"{month}\.? {day}(?:st|nd|rd|th)?,? (?P<year>\d{4})",
            r"{day}(?:st|nd|rd|th)? (?:of )?{month}|on {month} {day}(?:st|nd|rd|th)?",
        ),
        month_years=(r"{month},? (?P<year>\d{4})",),
        month_phrases=("(?:in|during|since|last|this|early|late|mid|of) {month}",),
        year_phrases=("(?:in|during|since|of) {year}",),
        days={"today|this morning|tonight": 0, r"yesterday(?!.*\b(?:today|this morning|tonight)\b)": 1},
        numbers=("a|an|one", "two", "three", "four", "five", "six"),
        units={"day|days": 1, "week|weeks": 7, "month|months": 30, "year|years": 365},
        ago=("{n} {unit} ago",),
        period_units={"weekend": "weekend", "week": "week", "month": "month", "year": "year"},
        periods=("{which} {unit}",),
        period_which={"last|past": "last", "this": "this"},
        weekdays=("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
        weekday_phrases=("on {day}",),
        last_weekday_phrases=("(?:last|this past) {day}",),
    ),
    "digits": Words(  # ISO "2024-02-29" and dotted "29.02.2024", after the English dates
        dates=(
            r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})",
            r"(?P<day>\d{1,2})\.(?P<month>\d{1,2})\.(?P<year>\d{4})",
        ),
        month_years=(),
    ),
}
# fmt: on
