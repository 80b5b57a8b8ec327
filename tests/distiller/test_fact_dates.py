"""A fact says when, for good (issue 37, item 2: a fact's date resolved): the distiller is told the exchange's
date and asked for dates, and a fact that still says "last Saturday" is stored with the day that meant then,
so it stays true when read months later and is found by that date. The scripted utility model answers as a
model that kept the relative words would."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from teleton.agent.distiller import Distiller, Exchange
from teleton.gateway.contract import ChatInfo
from teleton.llm import LLMClient
from teleton.memory.facts.dates import dated
from teleton.memory.facts.store import FactStore
from teleton.memory.journal.learnings import Learnings
from teleton.storage import Database
from tests.fakes.anthropic_server import FakeAnthropic, tool_use

GROUP = ChatInfo(id=-500, type="group", title="Running club")
THURSDAY = datetime(2023, 5, 25, 13, 56).timestamp()


async def test_a_fact_saying_last_saturday_is_stored_with_that_day_and_one_with_a_date_as_it_is(
    db: Database, llm: LLMClient, fake_api: FakeAnthropic, embedder, tmp_path: Path
) -> None:
    fake_api.queue(tool_use(("record_facts", {"facts": [
        {"content": "Melanie ran a charity race last Saturday.", "category": "sport", "importance": 0.6},
        {"content": "Melanie's next race is on 11 June 2023.", "category": "sport", "importance": 0.6},
        {"content": "Melanie likes running in the rain.", "category": "sport", "importance": 0.5},
    ]})))  # fmt: skip
    store = FactStore(db, embedder)
    distiller = Distiller(llm, store, Learnings(tmp_path))
    said = "I ran a charity race last Saturday! Next one is on 11 June. Love running in the rain."
    await distiller.distill(Exchange(GROUP, "Melanie", said, "Well done!", label=f"chat:{GROUP.id}", said_at=THURSDAY))

    asked = str(fake_api.requests[-1]["messages"][-1]["content"])
    assert "on Thursday 25 May 2023" in asked  # the model can write dates itself
    assert "happen as a date" in str(fake_api.requests[-1]["system"])  # and is asked to
    values = sorted(r[0] for r in await db.fetchall("select value from facts"))
    assert values == [
        "Melanie likes running in the rain.",
        "Melanie ran a charity race last Saturday (20 May 2023).",
        "Melanie's next race is on 11 June 2023.",
    ]
    found = await store.recall("what did Melanie do on 20 May 2023?", [f"chat:{GROUP.id}"], limit=1)
    assert found[0].value == "Melanie ran a charity race last Saturday (20 May 2023)."


def test_each_kind_of_past_is_written_plainly_and_dates_plans_and_an_unknown_moment_are_left_as_said() -> None:
    assert dated("We met yesterday", THURSDAY) == "We met yesterday (24 May 2023)"
    assert dated("Went camping last week.", THURSDAY) == "Went camping last week (15-21 May 2023)."
    assert dated("Painted it last year.", THURSDAY) == "Painted it last year (2022)."
    assert dated("Moved here last month", THURSDAY) == "Moved here last month (April 2023)"
    assert dated("Started three years ago", THURSDAY) == "Started three years ago (around May 2020)"
    assert dated("Moved on 8 May 2023", THURSDAY) == "Moved on 8 May 2023"  # a date already
    assert dated("Мы переехали вчера", THURSDAY) == "Мы переехали вчера (24 May 2023)"  # in any language searched
    assert dated("Anna ist letzte Woche umgezogen.", THURSDAY) == "Anna ist letzte Woche umgezogen (15-21 May 2023)."
    assert dated("Она родилась 8 мая 2023 года", THURSDAY) == "Она родилась 8 мая 2023 года"
    assert dated("Likes tea", THURSDAY) == "Likes tea"
    assert dated("The party is tonight.", THURSDAY) == "The party is tonight (25 May 2023)."
    # A birthday recurs, and a plan's "on Friday" or "this month" may be the next one: left as said.
    for said in ("Anna's birthday is on 8 May.", "We meet on Friday.", "They move this month.", "In May she flies"):
        assert dated(said, THURSDAY) == said
    assert dated("Мы встречаемся в пятницу", THURSDAY) == "Мы встречаемся в пятницу"
    assert dated("We met yesterday", None) == "We met yesterday"  # when it was said is not known
