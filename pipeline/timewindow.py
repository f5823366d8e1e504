"""The period a question asks about: "last month", "in March 2026", "since February",
"this week", "tavaly", "múlt héten", "márciusban" — as a window of days relative to today.

Rules, not a general date parser: a question holds at most a phrase or two about time, and
the answer must say exactly what it understood. (``dateparser`` was measured for this: 1.4 s
for its first search in a fresh process, "we" read as a Wednesday and "the may keys" as a
date, and no Hungarian suffixed months: docs/time.md.) English and Hungarian; a month
without a year is the latest such month not after today; the first phrase found wins.
"Today" and "now" are no period: "what do we use today" asks what is current, which the
decisions' statuses answer (pipeline/succession.py).
"""

from __future__ import annotations

import calendar
import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import date, timedelta
from typing import Final

from pipeline.model import Hit, TimeWindow

#: Month words (accents dropped, case folded) -> month number, English and Hungarian.
MONTHS: Final = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12, "januar": 1, "februar": 2, "marcius": 3, "aprilis": 4,
    "majus": 5, "junius": 6, "julius": 7, "augusztus": 8, "szeptember": 9, "oktober": 10,
}  # fmt: skip
#: A Hungarian month and its case ending: -ban/-ben (in), -ában/-ében (in, with a year),
#: -tól/-től (from), -ig (until); "óta" (since) follows as a word.
_HU_MONTH = (
    r"(?P<hu>janu[áa]r|febru[áa]r|m[áa]rcius|[áa]prilis|m[áa]jus|j[úu]nius|j[úu]lius|"
    r"augusztus|szeptember|okt[óo]ber|november|december)"
    r"(?P<suffix>[áa]ban|[ée]ben|ban|ben|[áa]t[óo]l|[ée]t[őo]l|t[óo]l|t[őo]l|[áa]ig|[ée]ig|ig|"
    r"[áa]|[ée]|ja|je)?"
    r"(?P<ota>\s+[óo]ta)?"
)
_EN_MONTH = (
    r"(?P<en>january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
_YEAR = r"(?P<year>(?:19|20)\d\d)"
NUMBERS: Final = {
    "a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "few": 3,
    "egy": 1, "két": 2, "kettő": 2, "három": 3, "négy": 4, "öt": 5, "hat": 6, "hét": 7,
    "nyolc": 8, "kilenc": 9, "tíz": 10,
}  # fmt: skip
_NUMBER = r"(?P<n>\d{1,3}|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + r")"
_UNITS: Final = {
    "day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month",
    "months": "month", "year": "year", "years": "year", "nap": "day", "napban": "day",
    "napon": "day", "hét": "week", "hétben": "week", "hónap": "month", "hónapban": "month",
    "év": "year", "évben": "year",
}  # fmt: skip
_UNIT = r"(?P<unit>" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r")"


def _month_of(m: re.Match[str]) -> int:
    word = _group(m, "en") or _group(m, "hu") or ""
    return MONTHS[_plain(word.casefold())]


def _plain(word: str) -> str:
    return word.translate(str.maketrans("áéíóöőúüű", "aeiooouuu"))


def _month_window(month: int, year: int | None, today: date) -> tuple[date, date]:
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    last = calendar.monthrange(year, month)[1]
    return date(year, month, 1), date(year, month, last)


def _shift_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 - months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _span(unit: str, n: int, today: date) -> date:
    if unit == "day":
        return today - timedelta(days=n)
    if unit == "week":
        return today - timedelta(weeks=n)
    if unit == "month":
        return _shift_months(today, n)
    return _shift_months(today, 12 * n)


Reader = Callable[[re.Match[str], date], tuple[date, date]]


def _group(m: re.Match[str], name: str) -> str | None:
    """A named group of the match, None when the rule's pattern has no such group."""
    return m.groupdict().get(name)


def _year_of(m: re.Match[str]) -> int | None:
    year = _group(m, "year")
    return int(year) if year else None


def _since(m: re.Match[str], today: date) -> tuple[date, date]:
    if _group(m, "en"):
        return _month_window(_month_of(m), _year_of(m), today)[0], today
    return date(_year_of(m) or today.year, 1, 1), today


def _hungarian(m: re.Match[str], today: date) -> tuple[date, date]:
    """A Hungarian month by its ending: in it, from or since it, until its end."""
    start, end = _month_window(_month_of(m), _year_of(m), today)
    suffix = _plain((_group(m, "suffix") or "").casefold())
    if _group(m, "ota") or suffix.endswith("tol"):
        return start, today
    if suffix.endswith("ig"):
        raise ValueError("an open start: no window")
    if suffix.endswith(("ban", "ben")) or _year_of(m) is not None:
        return start, end
    raise ValueError("a month named without a case ending: not a period")


#: Month words that are English words too, or that lower-case notes use for other things
#: ("Node 20 may break", "the 3 dec services"): a day is read from one only with a year,
#: an ordinal or "of" beside it, or written with a capital.
_AMBIGUOUS_MONTHS: Final = frozenset(
    {"may", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"}
)


class _NoPeriod(Exception):
    """The phrase says a time that is no period ("until April 1": no start), and no phrase
    overlapping it is one either."""


def _day(m: re.Match[str], today: date) -> tuple[date, date]:
    """One day: ISO or dotted digits, or a month and its day, with a year or without (the
    latest such day not after today, a 29 February the latest one); an impossible day (30
    February) is no day."""
    word = _group(m, "en")
    sure = _year_of(m) is not None or _group(m, "ord") or _group(m, "of")
    if word and word.islower() and word in _AMBIGUOUS_MONTHS and not sure:
        raise ValueError("a lower-case word that may not be a month")
    day = _day_of(m, today)
    return day, day


def _day_of(m: re.Match[str], today: date) -> date:
    month = int(_group(m, "mm") or 0) or _month_of(m)
    day_of_month = int(m.group("day"))
    year = _year_of(m)
    if year is not None:
        return date(year, month, day_of_month)
    calendar.monthrange(2024, month)  # a month that is none fails here, not in the loop
    for back in range(9):  # a 29 February is at most eight years back
        try:
            day = date(today.year - back, month, day_of_month)
        except ValueError:
            continue
        if day <= today:
            return day
    raise ValueError("no such day")


def _since_day(m: re.Match[str], today: date) -> tuple[date, date]:
    return _day(m, today)[0], today


def _until_day(m: re.Match[str], today: date) -> tuple[date, date]:
    raise _NoPeriod("until a day: no start")


def _days(m: re.Match[str], today: date) -> tuple[date, date]:
    """From one ISO day to another ("from 2026-03-01 to 2026-03-15")."""
    start = date(int(m.group("y1")), int(m.group("m1")), int(m.group("d1")))
    return start, date(int(m.group("y2")), int(m.group("m2")), int(m.group("d2")))


def _month(m: re.Match[str], today: date) -> tuple[date, date]:
    return _month_window(_month_of(m), _year_of(m), today)


def _year(m: re.Match[str], today: date) -> tuple[date, date]:
    year = _year_of(m) or today.year
    return date(year, 1, 1), date(year, 12, 31)


def _last_n(m: re.Match[str], today: date) -> tuple[date, date]:
    raw = m.group("n").casefold()
    n = int(raw) if raw.isdigit() else NUMBERS[raw]
    return _span(_UNITS[m.group("unit").casefold()], n, today), today


def _relative(word: str) -> Reader:
    def read(m: re.Match[str], today: date) -> tuple[date, date]:
        if word == "yesterday":
            day = today - timedelta(days=1)
            return day, day
        if word == "this week":
            return _week_start(today), today
        if word == "last week":
            start = _week_start(today) - timedelta(weeks=1)
            return start, start + timedelta(days=6)
        if word == "this month":
            return today.replace(day=1), today
        if word == "last month":
            first = _shift_months(today.replace(day=1), 1)
            return _month_window(first.month, first.year, today)
        if word == "this year":
            return date(today.year, 1, 1), today
        return date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)  # last year

    return read


_SINCE = r"(?:since|from|after)"
#: A day as a question writes it, each with what may not come right before it: 2026-04-01
#: (a time may follow: 2026-04-01T10:00) / 2026.04.01. / April 1(st)(, 2026) / 1(st) (of)
#: April (2026). Not a date inside a file name (2026-01-20-pgbouncer-pool-exhaustion).
_DAYS: Final = (
    (r"(?<![\w.-])", rf"{_YEAR}-(?P<mm>[01]\d)-(?P<day>[0-3]\d)(?=$|[^\w-]|T\d)"),
    (r"(?<![\w.])", rf"{_YEAR}\.\s?(?P<mm>[01]\d)\.\s?(?P<day>[0-3]\d)\.?(?!\w)"),
    (r"\b", rf"{_EN_MONTH}\.?\s+(?P<day>[0-3]?\d)(?P<ord>st|nd|rd|th)?\b(?!:)(?:,?\s+{_YEAR}\b)?"),
    (
        r"\b",
        rf"(?P<day>[0-3]?\d)(?P<ord>st|nd|rd|th)?\s+(?P<of>of\s+)?{_EN_MONTH}\b\.?"
        rf"(?:,?\s+{_YEAR}\b)?",
    ),
)
_ISO_DAY_FROM = r"(?P<y1>(?:19|20)\d\d)-(?P<m1>[01]\d)-(?P<d1>[0-3]\d)"
_ISO_DAY_TO = r"(?P<y2>(?:19|20)\d\d)-(?P<m2>[01]\d)-(?P<d2>[0-3]\d)(?![\w-])"
#: (pattern, reader), tried in order: the more specific phrases first.
_RULES: tuple[tuple[re.Pattern[str], Reader], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), reader)
    for pattern, reader in (
        # since February (2026) / since 2025
        (rf"\b{_SINCE}\s+{_EN_MONTH}\.?(?:\s+(?:of\s+)?{_YEAR})?\b", _since),
        (rf"\b{_SINCE}\s+{_YEAR}\b", _since),
        # from one ISO day to another; since / until a day; one day (_DAYS)
        (rf"\b(?:from|between)\s+{_ISO_DAY_FROM}\s+(?:to|and|until|till|through|-|–)\s+"
         rf"{_ISO_DAY_TO}", _days),
        *((rf"\b{_SINCE}\s+{form}", _since_day) for _, form in _DAYS),
        *((rf"\b(?:until|till|before|by)\s+{form}", _until_day) for _, form in _DAYS),
        *((rf"{bound}{form}", _day) for bound, form in _DAYS),
        # the last two weeks / past 3 months / az elmúlt két hétben
        (rf"\b(?:the\s+)?(?:last|past|previous)\s+{_NUMBER}\s+{_UNIT}\b", _last_n),
        (rf"\b(?:az\s+)?(?:elmúlt|utolsó)\s+{_NUMBER}\s+{_UNIT}", _last_n),
        # March 2026 / in March / 2026 márciusában / márciusban / február óta / februártól
        (rf"\b(?:(?:in|during)\s+)?{_EN_MONTH}\.?\s+(?:of\s+)?{_YEAR}\b", _month),
        (rf"\b(?:in|during)\s+{_EN_MONTH}\b", _month),
        (rf"(?<!\w)(?:{_YEAR}\.?\s+)?{_HU_MONTH}(?!\w)", _hungarian),
        # relative periods
        (r"\b(?:so\s+far\s+)?this\s+month\b|\bebben\s+a\s+hónapban|\be\s+hónapban",
         _relative("this month")),
        (r"\b(?:last|previous)\s+month\b|(?:\ba\s+)?\b(?:múlt|előző)\s+hónapban",
         _relative("last month")),
        (r"\bthis\s+week\b|\b(?:ezen\s+a|a|e)\s+héten", _relative("this week")),
        (r"\b(?:last|previous)\s+week\b|(?:\ba\s+)?\b(?:múlt|előző)\s+héten",
         _relative("last week")),
        (r"\bthis\s+year\b|\bidén\b", _relative("this year")),
        (r"\b(?:last|previous)\s+year\b|\btavaly", _relative("last year")),
        (r"\byesterday\b|\btegnap", _relative("yesterday")),
        # in 2025 / during 2025 / 2025-ben
        (rf"\b(?:in|during)\s+{_YEAR}\b(?!-\d\d-\d)", _year),  # not a whole date's year
        (rf"\b{_YEAR}-(?:ban|ben)\b", _year),
    )
)  # fmt: skip


def parse_window(question: str, today: date) -> TimeWindow | None:
    """The window of the first time phrase of ``question``, else None."""
    found: list[tuple[int, re.Match[str], Reader]] = []
    for pattern, reader in _RULES:
        m = pattern.search(question)
        if m is not None:
            found.append((m.start(), m, reader))
    if not found:
        return None
    # The first phrase; of phrases overlapping it, the one reaching furthest ("in April
    # 2026" over "in April").
    found.sort(key=lambda item: item[0])
    first_end = found[0][1].end()
    overlapping = [item for item in found if item[0] < first_end]
    rest = [item for item in found if item[0] >= first_end]
    overlapping.sort(key=lambda item: (-item[1].end(), item[0]))
    for group in (overlapping, rest):
        for _, m, reader in group:
            try:
                start, end = reader(m, today)
            except _NoPeriod:
                break  # nor is any phrase overlapping it a period ("until April 1")
            except (ValueError, KeyError):
                continue
            if start <= end:
                return TimeWindow(m.group(0).strip(), start.isoformat(), end.isoformat())
    return None


#: The words, besides its period, of a question about the period alone: what was decided,
#: discussed or done then ("what did we decide last month?", "mi történt márciusban?"),
#: matched by their English and Hungarian stems. Such a question has no topic for the noise
#: floor to judge, so the notes of its period answer it (``topic_words``).
PERIOD_ONLY_WORDS: Final = (
    "decide decided decision decisions make made happen happened happening discuss discussed "
    "discussion talk talked meet met meeting meetings session sessions change changed changes "
    "new anything everything work worked done do did so far "
    "döntöttünk döntöttek döntött döntés döntések született születtek történt történik "
    "megbeszéltünk beszéltünk változott változás új csináltunk megbeszélés megbeszélésen "
    "értekezlet értekezleten ülés ülésen what's whats news"
)
_STEMMED_BY: Final = ("english", "hungarian")


def _stems(word: str) -> set[str]:
    # Imported on first use: a CLI's --help imports this module and must not load the
    # KO-DB package (SQLAlchemy) or the stemmer for it.
    from pipeline.kodb import text as kodb_text

    return {w for language in _STEMMED_BY for w in kodb_text.words(word, language=language)}


@functools.cache
def _period_only_stems() -> frozenset[str]:
    return frozenset(stem for word in PERIOD_ONLY_WORDS.split() for stem in _long_stems(word))


def only_about(question: str, *phrases: str) -> bool:
    """Whether every word of ``question`` besides ``phrases`` (a period's) and stop words
    is one of ``PERIOD_ONLY_WORDS``: the question names no topic."""
    return not topic_words(question, *phrases)


def topic_words(question: str, *phrases: str) -> list[str]:
    """The words of ``question`` besides ``phrases`` (a period's), stop words and
    ``PERIOD_ONLY_WORDS``: what it names as its topic, if anything."""
    from pipeline.bridge import content_words

    rest = question
    for phrase in phrases:
        rest = rest.replace(phrase, " ", 1)
    known = _period_only_stems()
    # A one-letter stem ("s" of "what's") says nothing: "Kafka's" is a topic.
    return [word for word in content_words(rest) if not _long_stems(word) & known]


def _long_stems(word: str) -> set[str]:
    return {stem for stem in _stems(word) if len(stem) > 1}


#: What may follow "last" when it means the most recent one: events and records, not units
#: of time ("last week" is a period) nor an order ("the last step"); "previous" only before
#: a meeting ("the previous decision" is the one before the current).
_MEETINGS = r"(?:meeting|session|call|sync|standup|stand-up|retro|retrospective|workshop)s?"
_EVENTS = (
    rf"(?:{_MEETINGS}|(?:review|discussion|decision|update|release|incident|sprint|planning)s?"
    r"|time)"
)
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday"
_SEASONS = "spring summer autumn fall winter semester term quarter weekend night"
_PERIOD_WORDS = sorted(
    {*_UNITS, *MONTHS, *_WEEKDAYS.split(), *_SEASONS.split()}, key=len, reverse=True
)
#: "did we last …", unless a period follows ("was it last week", "last May", "last spring").
_NOT_A_PERIOD = (
    r"(?!\s+(?:\d|an?\b|two\b|three\b|few\b|couple\b|" + "|".join(_PERIOD_WORDS) + r")\b)"
)
#: Who or what did it last, one to four words ("did the TSC last discuss …", "was corepack
#: last …"), none of them an article or a possessive right before "last" ("did we finish
#: the last step" is an order).
_WHO = (
    r"(?:(?!(?:the|a|an|our|my|your|their|its|his|her|this|that|at)\s+last\b)[\w.'’-]+\s+)"
    r"{1,4}?"
)
#: After "did X last": the question's end ("when did we meet last?") or a word that is no
#: preposition, conjunction, "place" or length (a verb: "did the TSC last discuss …"; "did
#: our team finish last in the race", "did the outage last long" are no latest), and a
#: participle that then says no more than "last" does.
_THEN_A_VERB = (
    r"(?=\s*(?:[?.!]|$)|\s+(?!(?:in|on|at|for|of|to|and|or|but|place|all|with|by|from|among"
    r"|than|long|longer|until|till|through|beyond|more|over)\b)\w)"
    r"(?:\s+(?:updated|changed|discussed|touched|reviewed|edited|mentioned)\b)?"
)
#: Up to two words between "last" and its event, none a period ("the last TSC meeting", "our
#: last two releases"; "last week's meeting" is a period).
_BETWEEN = r"(?:\s+(?!(?:" + "|".join(_PERIOD_WORDS) + r")\b)[\w.'’-]+){0,2}?"
#: A participle after "last" that makes it "most recently", unless it names a field or a
#: header ("the last modified header", "last updated at").
_PARTICIPLE = (
    r"\blast\s+(?:updated|changed|discussed|touched|reviewed|edited|mentioned)\b"
    r"(?!\s+(?:header|date|time|timestamp|field|column|at|by|on)\b)"
)
#: A question asking for the newest notes: English "most recent(ly)", "latest", "newest",
#: "recently", "lately", "the last meeting (or another event)", "the previous meeting",
#: "did we (or the TSC) last …", "last updated"; Hungarian "legutóbb(i)", "legutolsó",
#: "legújabb", "legfrissebb", "nemrég(iben)", "mostanában", "az utóbbi időben" (inflected
#: too), "(leg)utoljára", "utolsó" before a meeting ("az utolsó megbeszélés"; "az utolsó
#: lépés" is an order). Not a tag, a path or a compound (":latest", "pkg@latest", "/latest",
#: "newest-first"), nor "least/most recently used".
_LATEST = re.compile(
    r"(?<![:@/=.\w-])(?:most\s+recent(?:ly)?(?!\s+used)|latest|newest|lately"
    r"|(?<!least\s)(?<!most\s)recently(?!\s+used))(?![-:@/=(\w]|\.\w)"
    rf"|\b(?:(?:the|our|my)\s+)?"
    rf"(?:last(?P<event>{_BETWEEN}\s+{_EVENTS})|previous(?P<meeting>\s+{_MEETINGS}))(?![-\w])"
    rf"|(?<!long\s)\b(?:did|has|have|had|was|were)\s+(?P<who>{_WHO})last(?![-\w])(?!\s+time\b)"
    rf"{_NOT_A_PERIOD}{_THEN_A_VERB}"
    rf"|{_PARTICIPLE}"
    r"|(?<!\w)(?:legut[óo]bb|legutols[óo]|leg[úu]jabb|legfrissebb|nemr[ée]g)\w*"
    r"|(?<!\w)(?:mostan[áa]ban|az\s+ut[óo]bbi\s+id[őo]ben|(?:leg)?utolj[áa]ra)(?!\w)"
    r"|(?<!\w)utols[óo](?=\s+(?:megbesz|[üu]l[ée]s|[ée]rtekezlet|retro|egyeztet|tal[áa]lkoz))",
    re.IGNORECASE,
)


def asks_latest(question: str) -> str | None:
    """The first phrase of ``question`` that asks for the newest notes ("the last retro"),
    else None."""
    m = _LATEST.search(question)
    return " ".join(m.group(0).split()) if m else None


def without_latest(question: str) -> str:
    """``question`` without the words that ask for the latest, keeping what it is the latest
    of ("what happened in the last retro?" -> "what happened in retro?"): what its words
    are about ("latest" is no word a note should be found or excerpted by)."""

    def kept(m: re.Match[str]) -> str:
        if m.group("who"):  # "when did the TSC last discuss": the TSC is kept
            return f" {m.group('who').strip()} "
        noun = (m.group("event") or m.group("meeting") or "").strip()
        return f" {noun}" if noun.casefold() != "time" else " "

    return _LATEST.sub(kept, question)


def apply_window(
    hits: Sequence[Hit], window: TimeWindow, limit: int | None = None
) -> tuple[list[Hit], TimeWindow]:
    """The hits dated in ``window``, then the undated ones (each in relevance order), the
    first ``limit`` of them, and the window saying what it did. A note without a date is
    kept, after the notes the period is about, and counted (never dropped for having none);
    a dated one outside the window is left out. When no hit is dated
    within the window (a year the question names as a topic, "died in 1960"), every hit is
    kept and the window is marked not applied."""
    if not any(h.date is not None and window.holds(h.date) for h in hits):
        return list(hits[:limit]), replace(window, applied=False)
    inside = [h for h in hits if h.date is not None and window.holds(h.date)]
    undated = [h for h in hits if h.date is None]
    outside = len(hits) - len(inside) - len(undated)
    kept = (inside + undated)[:limit]
    undated = sum(1 for h in kept if h.date is None)
    return kept, replace(window, applied=True, undated=undated, outside=outside)


#: Hits within this many σ of each other count as equally relevant when episodic recall
#: puts recent sessions first.
RECENT_TIER_SIGMAS: Final = 0.5


def newest_first(hits: Sequence[Hit], sigma: float | None, today: str, *, topic: bool) -> list[Hit]:
    """The hits of a question asking for the latest (``asks_latest``). With a ``topic``,
    the notes as relevant as the best (a cosine within ``RECENT_TIER_SIGMAS`` σ of the best)
    are gathered where the first of them stands, the newest first, and every other note
    keeps its order (hybrid retrieval's fused order too). Without one ("what happened at the
    last meeting?"), every hit, the newest first. Undated notes, and notes dated after
    ``today`` (an agenda for next month is not the last meeting), come after the dated
    ones; equal dates keep their order."""

    def day(h: Hit) -> str:
        return h.date if h.date is not None and h.date <= today else ""

    if not topic:
        return sorted(hits, key=day, reverse=True)
    cosines = [h.cosine for h in hits if h.cosine is not None]
    if not sigma or sigma <= 0 or not cosines:
        return list(hits)
    low = max(cosines) - sigma * RECENT_TIER_SIGMAS
    near = [h.cosine is not None and h.cosine >= low for h in hits]
    first = near.index(True)
    gathered = sorted((h for h, n in zip(hits, near, strict=True) if n), key=day, reverse=True)
    rest = [h for h, n in zip(hits, near, strict=True) if not n]
    return rest[:first] + gathered + rest[first:]


def recent_first(hits: Sequence[Hit], sigma: float | None) -> list[Hit]:
    """Episodic recall without a period: among hits equally relevant (in the same
    ``RECENT_TIER_SIGMAS`` step below the best cosine), the more recent note first; undated
    ones last within their step."""
    cosines = [h.cosine for h in hits if h.cosine is not None]
    if not sigma or sigma <= 0 or len(cosines) < 2:
        return list(hits)
    best, step = max(cosines), sigma * RECENT_TIER_SIGMAS

    def tier(h: Hit) -> float:
        return math.inf if h.cosine is None else math.floor((best - h.cosine) / step)

    newest = sorted(hits, key=lambda h: h.date or "", reverse=True)
    return sorted(newest, key=tier)
