"""Questions that name a time: the period is understood, and messages of that time are found first."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from teleton.memory.feed.embedding import embed_pending
from teleton.memory.feed.search import search_feed
from teleton.memory.search.time_ranges import past_time_range, query_time_range
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


@pytest.mark.parametrize("question", ["what happened in may 0000?", "plans for december 9999", "31 december 9999",
                                      "99999999 days ago"])  # fmt: skip
def test_a_time_no_calendar_holds_is_no_period_and_no_error(question: str) -> None:
    assert query_time_range(question, NOW) is None
    assert past_time_range(question, NOW) is None


@pytest.mark.parametrize(
    ("question", "period"),
    [
        # Russian
        ("Что Оля говорила 8 мая 2023?", ("2023-05-08", "2023-05-09")),
        ("что было 8-го мая", ("2023-05-08", "2023-05-09")),  # not yet this year: last year's
        ("Где мы были первого марта?", ("2024-03-01", "2024-03-02")),
        ("что мы планировали в мае", ("2023-05-01", "2023-06-01")),
        ("в начале июля", ("2023-07-01", "2023-08-01")),
        ("в мае 2023 года", ("2023-05-01", "2023-06-01")),
        ("в 2022 году", ("2022-01-01", "2023-01-01")),
        ("что я писал вчера", ("2024-03-12", "2024-03-13")),
        ("что он сказал позавчера", ("2024-03-11", "2024-03-12")),
        ("3 дня назад", ("2024-03-09", "2024-03-12")),
        ("два дня назад", ("2024-03-10", "2024-03-13")),
        ("неделю назад", ("2024-03-05", "2024-03-08")),
        ("на прошлой неделе", ("2024-03-04", "2024-03-11")),
        ("на этой неделе", ("2024-03-11", "2024-03-14")),
        ("в прошлом месяце", ("2024-02-01", "2024-03-01")),
        ("в этом году", ("2024-01-01", "2024-03-14")),
        ("в прошлые выходные", ("2024-03-09", "2024-03-11")),
        ("в прошлую пятницу", ("2024-03-08", "2024-03-09")),
        ("во вторник", ("2024-03-12", "2024-03-13")),
        # Ukrainian
        ("8 травня 2023", ("2023-05-08", "2023-05-09")),
        ("що ми купили у травні", ("2023-05-01", "2023-06-01")),
        ("наприкінці липня", ("2023-07-01", "2023-08-01")),
        ("з лютого", ("2024-02-01", "2024-03-01")),
        ("вчора", ("2024-03-12", "2024-03-13")),
        ("позавчора", ("2024-03-11", "2024-03-12")),
        ("три дні тому", ("2024-03-09", "2024-03-12")),
        ("тиждень тому", ("2024-03-05", "2024-03-08")),
        ("минулого тижня", ("2024-03-04", "2024-03-11")),
        ("цього місяця", ("2024-03-01", "2024-03-14")),
        ("торік", ("2023-01-01", "2024-01-01")),
        ("минулої п’ятниці", ("2024-03-08", "2024-03-09")),  # a typographic apostrophe
        ("у неділю", ("2024-03-10", "2024-03-11")),
        # Spanish
        ("¿Qué dijo el 8 de mayo de 2023?", ("2023-05-08", "2023-05-09")),
        ("a finales de julio", ("2023-07-01", "2023-08-01")),
        ("¿Adónde fuimos en mayo?", ("2023-05-01", "2023-06-01")),
        ("ayer", ("2024-03-12", "2024-03-13")),
        ("anteayer", ("2024-03-11", "2024-03-12")),
        ("hace 3 días", ("2024-03-09", "2024-03-12")),
        ("hace dos semanas", ("2024-02-26", "2024-03-02")),
        ("la semana pasada", ("2024-03-04", "2024-03-11")),
        ("el mes pasado", ("2024-02-01", "2024-03-01")),
        ("este año", ("2024-01-01", "2024-03-14")),
        ("el fin de semana pasado", ("2024-03-09", "2024-03-11")),
        ("el viernes pasado", ("2024-03-08", "2024-03-09")),
        ("el lunes", ("2024-03-11", "2024-03-12")),
        # Portuguese
        ("8 de maio de 2023", ("2023-05-08", "2023-05-09")),
        ("no início de julho", ("2023-07-01", "2023-08-01")),
        ("em maio", ("2023-05-01", "2023-06-01")),
        ("o que combinamos em marco", ("2024-03-01", "2024-04-01")),  # "março" typed without its cedilla
        ("ontem", ("2024-03-12", "2024-03-13")),
        ("anteontem", ("2024-03-11", "2024-03-12")),
        ("há três dias", ("2024-03-09", "2024-03-12")),
        ("5 dias atrás", ("2024-03-07", "2024-03-10")),
        ("na semana passada", ("2024-03-04", "2024-03-11")),
        ("no mês passado", ("2024-02-01", "2024-03-01")),
        ("na sexta-feira passada", ("2024-03-08", "2024-03-09")),
        ("na sexta passada", ("2024-03-08", "2024-03-09")),
        ("no domingo", ("2024-03-10", "2024-03-11")),
        # German
        ("Was war am 8. Mai 2023?", ("2023-05-08", "2023-05-09")),
        ("am ersten Mai", ("2023-05-01", "2023-05-02")),
        ("Was haben wir im Mai gemacht?", ("2023-05-01", "2023-06-01")),
        ("Ende Juli", ("2023-07-01", "2023-08-01")),
        ("gestern", ("2024-03-12", "2024-03-13")),
        ("vorgestern", ("2024-03-11", "2024-03-12")),
        ("vor 3 Tagen", ("2024-03-09", "2024-03-12")),
        ("vor zwei Wochen", ("2024-02-26", "2024-03-02")),
        ("letzte Woche", ("2024-03-04", "2024-03-11")),
        ("letztes Jahr", ("2023-01-01", "2024-01-01")),
        ("diese Woche", ("2024-03-11", "2024-03-14")),
        ("letztes Wochenende", ("2024-03-09", "2024-03-11")),
        ("letzten Freitag", ("2024-03-08", "2024-03-09")),
        ("am Montag", ("2024-03-11", "2024-03-12")),
        # French
        ("le 8 mai 2023", ("2023-05-08", "2023-05-09")),
        ("le premier mai", ("2023-05-01", "2023-05-02")),
        ("en mai", ("2023-05-01", "2023-06-01")),
        ("mi-juillet", ("2023-07-01", "2023-08-01")),
        ("Qu'est-ce que Paul a dit hier ?", ("2024-03-12", "2024-03-13")),  # "hier" alone: a French text
        ("hier soir", ("2024-03-12", "2024-03-13")),
        ("avant-hier", ("2024-03-11", "2024-03-12")),
        ("il y a 3 jours", ("2024-03-09", "2024-03-12")),
        ("il y a deux semaines", ("2024-02-26", "2024-03-02")),
        ("la semaine dernière", ("2024-03-04", "2024-03-11")),
        ("le mois dernier", ("2024-02-01", "2024-03-01")),
        ("cette année", ("2024-01-01", "2024-03-14")),
        ("le week-end dernier", ("2024-03-09", "2024-03-11")),
        ("vendredi dernier", ("2024-03-08", "2024-03-09")),
        # Italian
        ("l'8 maggio 2023", ("2023-05-08", "2023-05-09")),
        ("a maggio", ("2023-05-01", "2023-06-01")),
        ("ad aprile", ("2023-04-01", "2023-05-01")),
        ("a fine luglio", ("2023-07-01", "2023-08-01")),
        ("ieri", ("2024-03-12", "2024-03-13")),
        ("l'altro ieri", ("2024-03-11", "2024-03-12")),
        ("3 giorni fa", ("2024-03-09", "2024-03-12")),
        ("due settimane fa", ("2024-02-26", "2024-03-02")),
        ("la settimana scorsa", ("2024-03-04", "2024-03-11")),
        ("il mese scorso", ("2024-02-01", "2024-03-01")),
        ("quest'anno", ("2024-01-01", "2024-03-14")),
        ("lo scorso fine settimana", ("2024-03-09", "2024-03-11")),
        ("venerdì scorso", ("2024-03-08", "2024-03-09")),
        # Turkish
        ("8 Mayıs 2023", ("2023-05-08", "2023-05-09")),
        ("mayısta", ("2023-05-01", "2023-06-01")),
        ("Mayıs'ta", ("2023-05-01", "2023-06-01")),
        ("ocak ayında", ("2024-01-01", "2024-02-01")),
        ("geçen aralık", ("2023-12-01", "2024-01-01")),
        ("dün", ("2024-03-12", "2024-03-13")),
        ("3 gün önce", ("2024-03-09", "2024-03-12")),
        ("iki hafta önce", ("2024-02-26", "2024-03-02")),
        ("geçen hafta", ("2024-03-04", "2024-03-11")),
        ("geçen ay", ("2024-02-01", "2024-03-01")),
        ("bu yıl", ("2024-01-01", "2024-03-14")),
        ("geçen hafta sonu", ("2024-03-09", "2024-03-11")),
        ("geçen cuma", ("2024-03-08", "2024-03-09")),
        ("pazar günü", ("2024-03-10", "2024-03-11")),
        # Persian: Gregorian months, relative words; "this/last month, year" and weeks are Iran's
        ("۸ مه ۲۰۲۳", ("2023-05-08", "2023-05-09")),
        ("۸ می ۲۰۲۳", ("2023-05-08", "2023-05-09")),
        ("در ماه مه", ("2023-05-01", "2023-06-01")),
        ("اوایل ژوئیه", ("2023-07-01", "2023-08-01")),
        ("دیروز", ("2024-03-12", "2024-03-13")),
        ("ديروز", ("2024-03-12", "2024-03-13")),  # typed with an Arabic yeh
        ("پریروز", ("2024-03-11", "2024-03-12")),
        ("۳ روز پیش", ("2024-03-09", "2024-03-12")),
        ("دو هفته پیش", ("2024-02-26", "2024-03-02")),
        ("هفته\u200cی گذشته", ("2024-03-02", "2024-03-09")),  # the week starts on Saturday
        ("این هفته", ("2024-03-09", "2024-03-14")),
        ("ماه گذشته", ("2024-01-21", "2024-02-20")),  # Bahman 1402
        ("پارسال", ("2022-03-21", "2023-03-21")),  # 1401
        ("سه\u200cشنبه گذشته", ("2024-03-12", "2024-03-13")),
        ("جمعه گذشته", ("2024-03-08", "2024-03-09")),
        # Persian: Solar Hijri months
        ("چرا فقط تا چهارم فروردین می‌توانستند بمانند؟", ("2023-03-24", "2023-03-25")),
        ("۱۴ فروردین ۱۴۰۳", ("2024-04-02", "2024-04-03")),
        ("در فروردین", ("2023-03-21", "2023-04-21")),
        ("اسفند ۱۴۰۲", ("2024-02-20", "2024-03-20")),
        ("۱ مهر", ("2023-09-23", "2023-09-24")),
        ("دی ماه", ("2023-12-22", "2024-01-21")),
        ("در سال ۱۴۰۱", ("2022-03-21", "2023-03-21")),
        # Arabic
        ("8 مايو 2023", ("2023-05-08", "2023-05-09")),
        ("٨ مايو ٢٠٢٣", ("2023-05-08", "2023-05-09")),  # Arabic-Indic digits
        ("في مايو", ("2023-05-01", "2023-06-01")),
        ("في شهر آب", ("2023-08-01", "2023-09-01")),
        ("أمس", ("2024-03-12", "2024-03-13")),
        ("امس", ("2024-03-12", "2024-03-13")),
        ("أول أمس", ("2024-03-11", "2024-03-12")),
        ("ماذا فعلنا اليوم", ("2024-03-13", "2024-03-14")),
        ("قبل 3 أيام", ("2024-03-09", "2024-03-12")),
        ("منذ ثلاثة أيام", ("2024-03-09", "2024-03-12")),
        ("قبل يومين", ("2024-03-10", "2024-03-13")),
        ("منذ أسبوعين", ("2024-02-26", "2024-03-02")),
        ("الأسبوع الماضي", ("2024-03-04", "2024-03-11")),
        ("الشهر الماضي", ("2024-02-01", "2024-03-01")),
        ("هذا العام", ("2024-01-01", "2024-03-14")),
        ("الجمعة الماضية", ("2024-03-08", "2024-03-09")),
        ("يوم الجمعة", ("2024-03-08", "2024-03-09")),
    ],
)
def test_the_period_a_question_names_in_other_languages(question: str, period: tuple[str, str]) -> None:
    assert day(question) == period


@pytest.mark.parametrize(
    "question",
    [
        "life on Mars",  # French "mars" only after "en", "depuis", "fin"...
        "we talked in Mars",
        "Mai Tai at the bar",
        "He fired the gun once",  # Turkish "once" (önce) only after a number and a unit
        "Was hast du hier gesagt?",  # German "here", not French "yesterday"
        "Ich habe mit Mai gesprochen",  # a name: "im Mai" is the month
        "Wir haben mit August telefoniert",
        "el mar estaba tranquilo",
        "nadamos no mar",  # Portuguese "mar" is the sea, not março
        "o carro do Marco",
        "hace un día precioso",  # weather, not a day ago
        "faz um dia lindo",
        "ha 3 anni",  # Italian: is 3 years old, not Portuguese "há 3 anos"
        "la settimana",
        "le mardi gras",
        "sábado à noite",  # no "no", "passado": every Saturday night
        "na segunda vez",  # "the second time", not Monday
        "na quinta do avô",  # a farm, not Thursday
        "влияние на окружающую среду",  # the environment, not Wednesday
        "лютий мороз",  # fierce frost, not February
        "bu aralıkta",  # in this range, not December
        "ocakta pişirdim",  # on the stove, not January
        "nişanda tanıştık",  # at the engagement ("nisan" once folded), not April
        "pazar kurulmuş",  # a market, not Sunday
        "می‌خواهم بدانم",  # the verb prefix, not May
        "۸ می‌خوام",
        "مه غلیظ بود",  # fog, not May
        "مریم جون کجایی",  # "dear", not June
        "تیر خورد",  # shot, not Tir
        "مهر مادر",  # kindness, not Mehr
        "دی وی دی خریدم",  # DVD
        "قبل شهر رمضان",  # before Ramadan, not a month ago
        "في ذلك اليوم",  # that day, not today
        "اليوم الأول",  # the first day
        "الاثنين ذهبا معا",  # both, not Monday
        "في سيارة نيسان",  # a Nissan, not April
        "كان أب رائعا",  # a father, not August
    ],
)
def test_no_period_in_ordinary_words(question: str) -> None:
    assert day(question) is None


@pytest.mark.parametrize(
    ("date", "gregorian"),
    [
        ("۱ فروردین ۱۳۹۵", "2016-03-20"),
        ("۱ فروردین ۱۳۹۶", "2017-03-21"),
        ("۱ فروردین ۱۳۹۹", "2020-03-20"),
        ("۱ فروردین ۱۴۰۰", "2021-03-21"),
        ("۱ فروردین ۱۴۰۳", "2024-03-20"),
        ("۳۰ اسفند ۱۴۰۳", "2025-03-20"),  # 1403 is a leap year
        ("۱ فروردین ۱۴۰۴", "2025-03-21"),
    ],
)
def test_solar_hijri_dates(date: str, gregorian: str) -> None:
    assert day(date) == (gregorian, (datetime.fromisoformat(gregorian) + timedelta(days=1)).strftime("%Y-%m-%d"))


def test_no_such_solar_hijri_day() -> None:
    assert day("۳۰ اسفند ۱۴۰۲") == ("2024-02-20", "2024-03-20")  # 1402 is not a leap year: its month counts


@pytest.mark.parametrize(
    ("august_text", "may_text", "question", "months"),
    [
        ("We went hiking in the mountains with the kids", "We went hiking near the lake, lovely day",
         "where did we go hiking in {}", ("May", "August")),
        ("Ходили в поход в горы с детьми", "Ходили в поход к озеру, чудесный день",
         "куда мы ходили в поход в {}", ("мае", "августе")),
    ],
)  # fmt: skip
async def test_a_message_of_the_named_time_is_found_first(
    mdb: Database, embedder, august_text: str, may_text: str, question: str, months: tuple[str, str]
) -> None:
    may = datetime(2023, 5, 10).timestamp()
    august = datetime(2023, 8, 10).timestamp()
    await mdb.write(
        lambda conn: [add_messages(conn, 1, [august_text], start=august), add_messages(conn, 2, [may_text], start=may)]
    )
    await embed_pending(mdb, embedder)
    now = datetime(2023, 12, 1).timestamp()
    for month, first in zip(months, (2, 1), strict=True):
        hits = await search_feed(mdb, question.format(month), chat_ids=None, provider=embedder, now=now)
        assert [h.chat_id for h in hits] == [first, 3 - first]
