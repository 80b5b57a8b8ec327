"""Questions that name a time: the period is understood, and messages of that time are found first."""

from __future__ import annotations

from datetime import datetime

import pytest

from teleton.memory.feed.embedding import embed_pending
from teleton.memory.feed.search import search_feed
from teleton.memory.search.time_ranges import query_time_range
from teleton.storage import Database
from tests.memory.test_hybrid_search import add_messages

NOW = datetime(2024, 3, 13, 15, 30).timestamp()  # a Wednesday


def day(text: str) -> tuple[str, str] | None:
    found = query_time_range(text, NOW)
    if found is None:
        return None
    return (
        datetime.fromtimestamp(found.start).strftime("%Y-%m-%d"),
        datetime.fromtimestamp(found.end).strftime("%Y-%m-%d"),
    )


@pytest.mark.parametrize(
    ("question", "period"),
    [
        ("What did Tim say about his injury on 16 November, 2023?", ("2023-11-16", "2023-11-17")),
        ("What painting did Melanie show on October 13, 2023?", ("2023-10-13", "2023-10-14")),
        ("what happened on the 2nd of March", ("2024-03-02", "2024-03-03")),
        ("what happened on 20 March", ("2023-03-20", "2023-03-21")),  # not yet this year: last year's
        ("the invoice from 2024-02-29", ("2024-02-29", "2024-03-01")),
        ("the invoice from 29.02.2024", ("2024-02-29", "2024-03-01")),
        ("What setback did Melanie face in October 2023?", ("2023-10-01", "2023-11-01")),
        ("When did Melanie go camping in June?", ("2023-06-01", "2023-07-01")),
        ("what did we plan in March", ("2024-03-01", "2024-04-01")),
        ("How many times has she gone to the beach in 2023?", ("2023-01-01", "2024-01-01")),
        ("what did I say yesterday", ("2024-03-12", "2024-03-13")),
        ("anything new today?", ("2024-03-13", "2024-03-14")),
        ("what did we do last weekend", ("2024-03-09", "2024-03-11")),
        ("the restaurant from last week", ("2024-03-04", "2024-03-11")),
        ("bills of last month", ("2024-02-01", "2024-03-01")),
        ("trips of last year", ("2023-01-01", "2024-01-01")),
        ("the call last Friday", ("2024-03-08", "2024-03-09")),
        ("the call on Wednesday", ("2024-03-06", "2024-03-07")),  # today is Wednesday: the one before
        ("what did she say 3 days ago", ("2024-03-09", "2024-03-12")),
        ("on 31 February, 2023", ("2023-02-01", "2023-03-01")),  # no such day: its month still counts
    ],
)
def test_the_period_a_question_names(question: str, period: tuple[str, str]) -> None:
    assert day(question) == period


@pytest.mark.parametrize(
    "question",
    [
        "May I ask what you think?",  # the verb, not the month
        "What did Caroline paint?",
        "room 2023 is on floor 5",
        "",
    ],
)
def test_no_period(question: str) -> None:
    assert day(question) is None


async def test_a_message_of_the_named_time_is_found_first(mdb: Database, embedder) -> None:
    may = datetime(2023, 5, 10).timestamp()
    august = datetime(2023, 8, 10).timestamp()
    await mdb.write(
        lambda conn: [
            add_messages(conn, 1, ["We went hiking in the mountains with the kids"], start=august),
            add_messages(conn, 2, ["We went hiking near the lake, lovely day"], start=may),
        ]
    )
    await embed_pending(mdb, embedder)
    now = datetime(2023, 12, 1).timestamp()
    for month, first in (("May", 2), ("August", 1)):
        hits = await search_feed(mdb, f"where did we go hiking in {month}", chat_ids=None, provider=embedder, now=now)
        assert [h.chat_id for h in hits] == [first, 3 - first]
