"""The words that name a time in the languages keyword search stems (``stemming.STEMMERS``), for ``time_ranges``.

Data only, in one grammar with English's (``time_words_en``): each entry a lower-case regular-expression
fragment, ``|`` between the forms of one thing, written as people spell them (``time_ranges.fold`` folds the
tables and the query alike). A template names its slots in braces (``{month}``, ``{anymonth}``, ``{year}``,
``{n}``, ``{unit}``, ``{lone}``, ``{which}``, ``{day}``, ``{short}``; see ``time_ranges._compile``). Words that
are also ordinary words are kept out as docs/memory.md, "Time in questions", says, each with a test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# A day and month (and year), and a month and year, as the languages below write them; a language that says
# "8 de mayo de 2023" and one that says "8. Mai 2023" share them: their months go in one pattern.
DAY_MONTH = r"{day}(?:\.|-?(?:го|ого|е)|º|ª|°|er)? (?:de |of )?{month}\.?(?:,? (?:de |del |سال |عام )?{year})?"
MONTH_YEAR = r"{month}\.?,? (?:de |del |سال |عام )?{year}"


@dataclass(frozen=True)
class Words:
    """How one language names a time. Weekdays are Monday first; months January first."""

    months: tuple[str, ...] = ()
    dated_only: str = ""  # month forms that count only beside a day number or a year
    year_only: str = ""  # month forms that count only beside a year
    dates: tuple[str, ...] = (DAY_MONTH,)  # {day} {month} {year}: a day; the first template found decides
    month_years: tuple[str, ...] = (MONTH_YEAR,)  # {month} {year}
    month_phrases: tuple[str, ...] = ()  # {month} / {anymonth}: a month of the last twelve
    year_phrases: tuple[str, ...] = ()  # {year}
    day_words: tuple[str, ...] = ()  # the first, second... day: "первого" (мая)
    days: dict[str, int] = field(default_factory=dict)  # -> how many days back: 0 today, 1 yesterday
    days_if_detected: dict[str, int] = field(default_factory=dict)  # only in a text of this language
    numbers: tuple[str, ...] = ()  # one, two...
    units: dict[str, int] = field(default_factory=dict)  # -> days
    lone_units: str = ""
    ago: tuple[str, ...] = ()  # {n} {unit} / {lone}
    period_units: dict[str, str] = field(default_factory=dict)  # -> week / month / year / weekend
    last_periods: tuple[str, ...] = ()  # {unit}
    this_periods: tuple[str, ...] = ()  # {unit}
    periods: tuple[str, ...] = ()  # {which} {unit}: last or this as ``period_which`` says
    period_which: dict[str, str] = field(default_factory=dict)  # "last|past" -> "last"
    period_words: dict[str, tuple[str, str]] = field(default_factory=dict)  # "торік" -> ("last", "year")
    weekdays: tuple[str, ...] = ()
    weekdays_short: tuple[str, ...] = ()
    weekday_phrases: tuple[str, ...] = ()  # {day} / {short}: the last such day before today (or a plan)
    last_weekday_phrases: tuple[str, ...] = ()  # {day} / {short}: the same, words that cannot be a plan
    solar_hijri: bool = False  # months and years of the Solar Hijri calendar (Iran, Afghanistan)
    solar_periods: bool = False  # "this / last month, year" are Solar Hijri ones


TR_SUFFIX = r"(?:'?(?:ki|kü|ın|in|nın|nin|da|de|ta|te|daki|deki|taki|teki|dan|den|tan|ten))?"
NEXT_ES_PT = r"(?! (?:que viene|que vem|próxim[oa]))"
FA_NUMBERS = ("یک|یه", "دو", "سه", "چهار", "پنج", "شش|شیش", "هفت", "هشت", "نه", "ده")
FA_ORDINALS = ("اول|یکم", "دوم", "سوم", "چهارم", "پنجم", "ششم", "هفتم", "هشتم", "نهم", "دهم")

# fmt: off
LANGUAGES: dict[str, Words] = {
    "ru": Words(
        months=(
            "январь|января|январе", "февраль|февраля|феврале", "март|марта|марте", "апрель|апреля|апреле",
            "май|мая|мае", "июнь|июня|июне", "июль|июля|июле", "август|августа|августе", "сентябрь|сентября|сентябре",
            "октябрь|октября|октябре", "ноябрь|ноября|ноябре", "декабрь|декабря|декабре",
        ),
        month_phrases=("(?:в|во|с|со) {month}", "(?:начале|конце|середине|начала|конца|середины) {month}"),
        year_phrases=(r"(?:в|во|с|со) {year}(?:-м| году| года| г\.?)",),
        day_words=(
            "первого", "второго", "третьего", "четвёртого", "пятого", "шестого", "седьмого", "восьмого", "девятого",
            "десятого",
        ),
        days={r"сегодня|сегодняшн\w*": 0, r"вчера|вчерашн\w*": 1, r"позавчера|позавчерашн\w*": 2},
        numbers=(
            "один|одну|одна|одно", "два|две|пару|пара", "три", "четыре", "пять", "шесть", "семь", "восемь", "девять",
            "десять",
        ),
        units={
            "день|дня|дней|сутки|суток": 1, "неделю|недели|недель": 7, "месяц|месяца|месяцев": 30, "год|года|лет": 365,
            "полгода": 182,
        },
        lone_units="день|сутки|неделю|месяц|год|полгода",
        ago=("{n} {unit} (?:тому )?назад", "{lone} (?:тому )?назад"),
        period_units={
            "неделе|неделю|недели|неделя": "week", "месяце|месяц|месяца": "month", "году|год|года": "year",
            "выходные|выходных|выходными": "weekend",
        },
        last_periods=("прошл(?:ой|ую|ая|ом|ый|ого|ые|ых|ыми) {unit}",),
        this_periods=("(?:этой|эту|эта|этом|этот|этого|эти|этих|текущ(?:ей|ую|ем|ий|его)) {unit}",),
        weekdays=(
            "понедельник|понедельника", "вторник|вторника", "среда|среду|среды", "четверг|четверга",
            "пятница|пятницу|пятницы", "суббота|субботу|субботы", "воскресенье|воскресенья",
        ),
        weekday_phrases=("(?:в|во) (?:прошл(?:ый|ую|ое) )?{day}", "прошл(?:ый|ую|ое|ой|ого) {day}"),
    ),
    "uk": Words(
        months=(
            "січень|січня|січні", "лютий|лютого|лютому", "березень|березня|березні", "квітень|квітня|квітні",
            "травень|травня|травні", "червень|червня|червні", "липень|липня|липні", "серпень|серпня|серпні",
            "вересень|вересня|вересні", "жовтень|жовтня|жовтні", "листопад|листопада|листопаді",
            "грудень|грудня|грудні",
        ),
        dated_only="лютий",  # also "fierce": "у лютий мороз"
        month_phrases=(
            "(?:у|в|з|із|зі|від) {month}", "(?:початку|наприкінці|кінці|кінця|середині|середини) {month}",
        ),
        year_phrases=(r"(?:у|в|з|із) {year}(?:-му| році| року| р\.?)",),
        day_words=(
            "першого", "другого", "третього", "четвертого", "п'ятого", "шостого", "сьомого", "восьмого", "дев'ятого",
            "десятого",
        ),
        days={r"сьогодні|сьогоднішн\w*": 0, r"вчора|учора|вчорашн\w*|учорашн\w*": 1, "позавчора|позаучора": 2},
        numbers=(
            "один|одну|одна|одного", "два|дві|пару|пара", "три", "чотири", "п'ять", "шість", "сім", "вісім", "дев'ять",
            "десять",
        ),
        units={
            "день|дні|днів|добу|доби": 1, "тиждень|тижні|тижнів": 7, "місяць|місяці|місяців": 30, "рік|роки|років": 365,
            "півроку": 182,
        },
        lone_units="день|добу|тиждень|місяць|рік|півроку",
        ago=("{n} {unit} (?:тому|назад)", "{lone} (?:тому|назад)"),
        period_units={
            "тиждень|тижня|тижні": "week", "місяць|місяця|місяці": "month", "рік|року|році": "year",
            "вихідні|вихідних": "weekend",
        },
        last_periods=("минул(?:ого|ому|ій|ої|ий|у|і|их) {unit}",),
        this_periods=("(?:цього|цьому|цей|ця|цю|ці|цих|цієї|поточн(?:ого|ому|ий)) {unit}",),
        period_words={"торік|торiк": ("last", "year"), "цьогоріч": ("this", "year")},
        weekdays=(
            "понеділок|понеділка", "вівторок|вівторка", "середа|середу|середи", "четвер|четверга",
            "п'ятниця|п'ятницю|п'ятниці", "субота|суботу|суботи", "неділя|неділю|неділі",
        ),
        weekday_phrases=("(?:у|в) (?:минул(?:ий|у|е) )?{day}", "минул(?:ого|ої|ий|у|е) {day}"),
    ),
    "es": Words(
        months=(
            "enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre|setiembre", "octubre",
            "noviembre", "diciembre",
        ),
        month_phrases=(
            "(?:en|desde|durante) (?:el mes de )?{month}", "(?:principios|finales|fines|mediados) de {month}",
            "mes de {month}", "{month} pasado", "pasado {month}",
        ),
        year_phrases=("(?:en|desde|durante) (?:el )?(?:año )?{year}",),
        day_words=("primero",),
        days={"hoy": 0, "ayer|anoche": 1, "anteayer|antier|antes de ayer|anteanoche": 2},
        numbers=("un|una|uno", "dos|un par de", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez"),
        units={"día|días": 1, "semana|semanas": 7, "mes|meses": 30, "año|años": 365},
        ago=(r"hace (?!un día\b){n} {unit}",),  # "hace un día precioso" is the weather
        period_units={"semana": "week", "mes": "month", "año": "year", "fin de semana|finde": "weekend"},
        last_periods=("{unit} pasad[oa]", "pasad[oa] {unit}"),
        this_periods=("(?:este|esta) {unit}",),
        weekdays=("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
        weekday_phrases=("el (?:pasado )?{day}" + NEXT_ES_PT, "{day} pasado"),
    ),
    "pt": Words(
        months=(
            "janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro", "outubro",
            "novembro", "dezembro",
        ),  # not "mar": the sea
        month_phrases=(
            "(?:em|desde|durante) (?:o mês de )?{month}", "(?:início|inicio|fim|final|meados|começo) de {month}",
            "mês de {month}", "{month} passado",
        ),
        year_phrases=("(?:em|desde|durante) (?:o ano de )?{year}", "no ano de {year}"),
        day_words=("primeiro",),
        days={"hoje": 0, "ontem": 1, "anteontem|antes de ontem": 2},
        numbers=("um|uma", "dois|duas", "três", "quatro", "cinco", "seis", "sete", "oito", "nove", "dez"),
        units={"dia|dias": 1, "semana|semanas": 7, "mês|meses": 30, "ano|anos": 365},
        ago=(r"(?:há|faz) (?!um dia\b){n} {unit}", "{n} {unit} atrás"),  # "faz um dia lindo": weather
        period_units={"semana": "week", "mês": "month", "ano": "year", "fim de semana|fim-de-semana|fds": "weekend"},
        last_periods=("{unit} passad[oa]", "passad[oa] {unit}"),
        this_periods=("(?:nest[ae]|est[ae]|ness[ae]|ess[ae]) {unit}",),
        weekdays=(
            "segunda-feira|segunda feira", "terça-feira|terça feira", "quarta-feira|quarta feira",
            "quinta-feira|quinta feira", "sexta-feira|sexta feira", "sábado", "domingo",
        ),
        weekdays_short=("segunda", "terça", "quarta", "quinta", "sexta", "sábado", "domingo"),
        weekday_phrases=(
            "n[ao] (?:últim[ao] )?{day}" + NEXT_ES_PT, "(?:n[ao] )?últim[ao] {short}", "{short} passad[ao]",
        ),
    ),
    "de": Words(
        months=(
            "januar|jänner", "februar|feber", "märz|maerz", "april", "mai", "juni", "juli", "august", "september",
            "oktober", "november", "dezember",
        ),  # "Mai" and "August" are names too: alone, a month only after "im", "seit", "Ende"...
        month_phrases=("(?:im|seit|ab|anfang|ende|mitte|letzten|vergangenen|diesen) {month}", "im monat {month}"),
        year_phrases=("(?:im jahre?|seit|anno) {year}",),
        day_words=(
            "ersten", "zweiten", "dritten", "vierten", "fünften", "sechsten", "siebten", "achten", "neunten", "zehnten",
        ),
        days={"heute": 0, r"gestern|gestrig\w*": 1, "vorgestern": 2},
        numbers=(
            "ein|eine|einem|einer|eins", "zwei", "drei", "vier", "fünf|fuenf", "sechs", "sieben", "acht", "neun",
            "zehn",
        ),
        units={"tag|tage|tagen": 1, "woche|wochen": 7, "monat|monate|monaten": 30, "jahr|jahre|jahren": 365},
        ago=("vor {n} {unit}",),
        period_units={"woche": "week", "monat": "month", "jahr": "year", "wochenende": "weekend"},
        last_periods=("(?:letzt|vorig|vergangen)(?:e|en|er|es|em)? {unit}",),
        this_periods=("dies(?:e|en|er|es|em) {unit}",),
        period_words={"heuer": ("this", "year")},
        weekdays=("montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag|sonnabend", "sonntag"),
        weekday_phrases=("am (?:letzten |vergangenen |vorigen )?{day}", "(?:letzten|vergangenen|vorigen) {day}"),
    ),
    "fr": Words(
        months=(
            "janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre", "novembre",
            "décembre",
        ),  # "mars" is the planet too: alone, a month only after "en", "depuis", "fin"...
        month_phrases=("(?:en|depuis|début|fin|courant|durant|pendant) {month}", "mi-{month}", "mois d(?:e |'){month}"),
        year_phrases=("(?:en|depuis|durant|pendant) (?:l'année )?{year}",),
        day_words=("premier",),
        days={"aujourd'hui": 0, "hier (?:soir|matin|midi|après-midi)|d'hier": 1, "avant-hier|avant hier": 2},
        days_if_detected={"hier": 1},  # German "here"
        numbers=("un|une", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf", "dix"),
        units={"jour|jours": 1, "semaine|semaines": 7, "mois": 30, "an|ans|année|années": 365},
        ago=("il y a {n} {unit}",),
        period_units={"semaine": "week", "mois": "month", "an|année": "year", "week-end|weekend|week end": "weekend"},
        last_periods=("{unit} derni(?:er|ère)", "{unit} passée?"),
        this_periods=("(?:cette|ce|cet) {unit}(?:-ci)?",),
        weekdays=("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
        weekday_phrases=("{day} (?:dernier|passé)",),  # alone, "mardi" is also "le mardi" (every) or Mardi gras
    ),
    "it": Words(
        months=(
            "gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre",
            "novembre", "dicembre",
        ),
        month_phrases=(
            "(?:a|ad|in|da|dal|nel mese di|mese di) {month}", "(?:inizio|fine|metà)(?: di)? {month}", "{month} scorso",
        ),
        year_phrases=("(?:nel|dal|nell'anno|durante il) {year}",),
        day_words=("primo",),
        days={"oggi": 0, "ieri": 1, "l'altro ieri|l'altroieri|altroieri|ieri l'altro": 2},
        numbers=("un|uno|una", "due|un paio di", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove", "dieci"),
        units={"giorno|giorni": 1, "settimana|settimane": 7, "mese|mesi": 30, "anno|anni": 365},
        ago=("{n} {unit} fa",),
        period_units={
            "settimana": "week", "mese": "month", "anno": "year", "fine settimana|weekend|week-end": "weekend",
        },
        last_periods=("{unit} (?:scors[oa]|passat[oa])", "(?:lo |la |il )?scors[oa] {unit}"),
        this_periods=("quest(?:[oa] |'){unit}",),
        weekdays=("lunedì", "martedì", "mercoledì", "giovedì", "venerdì", "sabato", "domenica"),
        weekday_phrases=("{day} (?:scors[oa]|passat[oa])", "(?:lo |la )?scors[oa] {day}"),
    ),
    "tr": Words(
        months=(
            "ocak", "şubat", "mart", "nisan", "mayıs", "haziran", "temmuz", "ağustos", "eylül", "ekim", "kasım",
            "aralık",
        ),
        dated_only="ocak|nisan|aralık",  # a stove; "nişan" (engagement) folds to "nisan"; a gap
        month_phrases=("{month}'?(?:da|de|ta|te)", "{anymonth} ay(?:ı|ında|ından|ındaki)", "geçen {anymonth}"),
        year_phrases=("{year}'?(?:de|da|te|ta|den|dan)", "{year} yıl(?:ında|ı|ının)"),
        days={"bugün|bugünkü": 0, "dün|dünkü": 1, "evvelsi gün|evvelki gün|dünden önceki gün": 2},
        numbers=("bir", "iki", "üç", "dört", "beş", "altı", "yedi", "sekiz", "dokuz", "on"),
        units={"gün": 1, "hafta": 7, "ay": 30, "yıl|sene": 365},
        ago=("{n} {unit} (?:önce|evvel)",),
        period_units={"hafta": "week", "ay": "month", "yıl|sene": "year", "hafta sonu|haftasonu": "weekend"},
        last_periods=("geçen {unit}" + TR_SUFFIX,),
        this_periods=("bu {unit}" + TR_SUFFIX,),
        weekdays=("pazartesi", "salı", "çarşamba", "perşembe", "cuma", "cumartesi", "pazar"),
        weekday_phrases=("geçen {day}" + TR_SUFFIX, "{day} günü"),  # "pazar" alone is a market
    ),
    "fa": Words(
        months=(
            "ژانویه", "فوریه", "مارس", "آوریل", "مه|می", "ژوئن|جون", "ژوئیه|جولای", "اوت|آگوست", "سپتامبر", "اکتبر",
            "نوامبر", "دسامبر",
        ),
        dated_only="مه|جون",  # fog; "dear" ("مریم جون")
        year_only="می",  # the verb prefix: "۸ می‌خوام"
        month_phrases=("(?:در|از|اوایل|اواخر|اواسط) (?:ماه )?{month}", "ماه {anymonth}", "{month} ماه"),
        year_phrases=("(?:در )?سال {year}", "در {year}"),
        day_words=FA_ORDINALS,
        days={"امروز": 0, "دیروز": 1, "پریروز": 2},
        numbers=FA_NUMBERS,
        units={"روز": 1, "هفته": 7, "ماه": 30, "سال": 365},
        ago=("{n} {unit}(?: ?ی)? (?:پیش|قبل)",),
        period_units={"هفته": "week", "ماه": "month", "سال": "year", "آخر هفته": "weekend"},
        last_periods=("{unit}(?: ?ی)? (?:گذشته|پیش|قبل|قبلی)",),
        this_periods=("این {unit}",),
        period_words={"پارسال": ("last", "year"), "امسال": ("this", "year")},
        weekdays=("دو ?شنبه", "سه ?شنبه", "چهار ?شنبه", "پنج ?شنبه", "جمعه", "شنبه", "یک ?شنبه"),
        weekday_phrases=("روز {day}", "{day}(?: ?ی)? (?:گذشته|پیش|قبل)"),
        solar_periods=True,
    ),
    "fa_solar": Words(
        months=(
            "فروردین", "اردیبهشت", "خرداد", "تیر", "مرداد|امرداد", "شهریور", "مهر", "آبان", "آذر", "دی", "بهمن",
            "اسفند",
        ),
        dated_only="تیر|مهر|آبان|آذر|دی|بهمن",  # an arrow, kindness, names, a letter, an avalanche
        month_phrases=("(?:در|از|اوایل|اواخر|اواسط) (?:ماه )?{month}", "ماه {anymonth}", "{anymonth} ?ماه"),
        year_phrases=("(?:در )?سال {year}",),
        day_words=FA_ORDINALS,
        solar_hijri=True,
    ),
    "ar": Words(
        months=(
            "يناير|كانون الثاني", "فبراير|شباط", "مارس|آذار", "أبريل|إبريل|نيسان", "مايو|أيار", "يونيو|يونيه|حزيران",
            "يوليو|يوليه|تموز", "أغسطس|آب", "سبتمبر|أيلول", "أكتوبر|تشرين الأول", "نوفمبر|تشرين الثاني",
            "ديسمبر|كانون الأول",
        ),
        dated_only="آب|نيسان",  # folds to "اب" (father); a car
        month_phrases=(
            "(?:في|خلال|منذ|بداية|نهاية|منتصف|مطلع|أوائل|أواخر|أواسط) (?:شهر )?{month}", "شهر {anymonth}",
        ),
        year_phrases=("(?:في |خلال |منذ )?(?:عام|سنة|العام) {year}", "(?:في|خلال|منذ) {year}"),
        days={
            "(?<!ذلك )(?<!نفس )(?<!هذا )(?<!في )اليوم(?! ال)": 0, "أمس|الأمس|بالأمس|البارحة": 1,
            "أول أمس|أول من أمس|قبل أمس|أول البارحة": 2,
        },  # "اليوم" is also "the day": "في ذلك اليوم", "اليوم الأول"
        numbers=(
            "واحد", "", "ثلاثة|ثلاث", "أربعة|أربع", "خمسة|خمس", "ستة|ست", "سبعة|سبع", "ثمانية|ثماني|ثمان", "تسعة|تسع",
            "عشرة|عشر",
        ),  # two: the dual of the unit, "يومين"
        units={
            "يوم|يوما|أيام": 1, "يومين": 2, "أسبوع|أسابيع": 7, "أسبوعين": 14, "شهر|أشهر|شهور": 30, "شهرين": 60,
            "سنة|سنوات|سنين|عام|أعوام": 365, "سنتين|عامين": 730,
        },
        lone_units="يوم|يومين|أسبوع|أسبوعين|شهر|شهرين|سنة|عام|سنتين|عامين",
        ago=("(?:منذ|قبل) {n} {unit}", "(?:منذ|قبل) {lone}(?! ال| رمضان)"),  # not "قبل يوم الجمعة", "قبل شهر رمضان"
        period_units={
            "الأسبوع": "week", "الشهر": "month", "السنة|العام": "year",
            "نهاية الأسبوع|عطلة نهاية الأسبوع|الويكند": "weekend",
        },
        last_periods=("{unit} (?:الماضي|الماضية|الفائت|الفائتة|المنصرم|المنصرمة|السابق|السابقة)",),
        this_periods=("(?:هذا|هذه) {unit}",),
        weekdays=("الاثنين|الإثنين", "الثلاثاء", "الأربعاء", "الخميس", "الجمعة", "السبت", "الأحد"),
        weekday_phrases=("يوم {day}", "{day} (?:الماضي|الماضية|الفائت|الفائتة)"),  # "الاثنين" alone is "both"
    ),
}
# fmt: on
