"""Time phrases in questions, English and Hungarian, read against a fixed today."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from pipeline.model import Hit, TimeWindow
from pipeline.timewindow import (
    apply_window,
    asks_latest,
    newest_first,
    only_about,
    parse_window,
    recent_first,
    without_latest,
)

TODAY = date(2026, 6, 15)  # a Monday
EXPECT = Path(__file__).resolve().parents[1] / "data/judged/examples-vault-current.expect.jsonl"


@pytest.mark.parametrize(
    ("question", "text", "start", "end"),
    [
        ("what did we decide last month about secrets", "last month", "2026-05-01", "2026-05-31"),
        ("what did we decide in April 2026", "in April 2026", "2026-04-01", "2026-04-30"),
        ("what changed since February 2026", "since February 2026", "2026-02-01", "2026-06-15"),
        ("what happened the last two weeks", "the last two weeks", "2026-06-01", "2026-06-15"),
        ("what did we try in september", "in september", "2025-09-01", "2025-09-30"),
        ("last week's incidents", "last week", "2026-06-08", "2026-06-14"),
        ("so far this month", "so far this month", "2026-06-01", "2026-06-15"),
        ("mit döntöttünk múlt hónapban", "múlt hónapban", "2026-05-01", "2026-05-31"),
        ("mi történt márciusban", "márciusban", "2026-03-01", "2026-03-31"),
        ("2026 márciusában mi volt", "2026 márciusában", "2026-03-01", "2026-03-31"),
        ("mi változott február óta", "február óta", "2026-02-01", "2026-06-15"),
        ("decembertől kezdve", "decembertől", "2025-12-01", "2026-06-15"),
        ("az elmúlt két hétben", "az elmúlt két hétben", "2026-06-01", "2026-06-15"),
        ("mit csináltunk tavaly", "tavaly", "2025-01-01", "2025-12-31"),
        ("what did we ship in 2025", "in 2025", "2025-01-01", "2025-12-31"),
        # One day: ISO, dotted (Hungarian), a month and its day either way round; without a
        # year, the latest such day not after today.
        ("who attended the meeting on 2026-04-01?", "2026-04-01", "2026-04-01", "2026-04-01"),
        ("mi történt 2026. 04. 01-én?", "2026. 04. 01", "2026-04-01", "2026-04-01"),
        ("what happened on April 1, 2026?", "April 1, 2026", "2026-04-01", "2026-04-01"),
        ("the meeting on 1st of April 2026", "1st of April 2026", "2026-04-01", "2026-04-01"),
        ("what did we decide on march 3rd", "march 3rd", "2026-03-03", "2026-03-03"),
        ("the call of 20 December", "20 December", "2025-12-20", "2025-12-20"),
        ("the 2026-04-01T10:00 call", "2026-04-01", "2026-04-01", "2026-04-01"),
        ("what happened on February 29", "February 29", "2024-02-29", "2024-02-29"),
        ("who decided 1st of may", "1st of may", "2026-05-01", "2026-05-01"),
        # Since or after a day is from it to today; from one ISO day to another, that span.
        ("what changed since April 1, 2026?", "since April 1, 2026", "2026-04-01", "2026-06-15"),
        ("incidents after 2026-04-01", "after 2026-04-01", "2026-04-01", "2026-06-15"),
        (
            "from 2026-03-01 to 2026-03-15",
            "from 2026-03-01 to 2026-03-15",
            "2026-03-01",
            "2026-03-15",
        ),
        ("what happened in 2026-04?", "in 2026", "2026-01-01", "2026-12-31"),
    ],
)
def test_a_time_phrase_becomes_a_window(question: str, text: str, start: str, end: str) -> None:
    w = parse_window(question, TODAY)
    assert w is not None
    assert (w.text, w.start, w.end) == (text, start, end)


@pytest.mark.parametrize(
    "question",
    [
        "what do we use for feature flags today?",  # today: what is current, not a period
        "how do we rotate the may keys",
        "we use redis",
        "a march to the sea",
        "Mit csináljak először",
        "március",  # a month named without a case ending says no period
        "augusztusig",  # until August: no start
        "what is in 2026-01-20-pgbouncer-pool-exhaustion",  # a file name's date
        "release 2026-13-01 notes",  # no month 13
        "we may 10x the pool",
        # Until or before a day has no start; a lower-case "may" or "dec" beside a number is
        # a word, not a month, without a year, an ordinal or "of".
        "what did we decide before April 1",
        "until 2026-04-01",
        "why Node 20 may break our build",
        "ADR 5 may be superseded",
        "the 3 dec services",
    ],
)
def test_words_that_are_no_period_give_no_window(question: str) -> None:
    assert parse_window(question, TODAY) is None


def test_the_judged_windows_are_read_as_their_authors_meant_them() -> None:
    for line in EXPECT.read_text(encoding="utf-8").splitlines():
        e = json.loads(line)
        w = parse_window(e["question"], date.fromisoformat(e["today"]))
        got = None if w is None else {"from": w.start, "to": w.end}
        assert got == e["window"], e["question"]


def hit(path: str, cosine: float, day: str | None) -> Hit:
    return Hit(path, path, "session", cosine, date=day)


APRIL = TimeWindow("in April 2026", "2026-04-01", "2026-04-30")


def test_a_window_keeps_its_notes_and_the_undated_ones_and_counts_what_it_left_out() -> None:
    hits = [
        hit("a", 0.9, "2026-03-30"),
        hit("b", 0.8, "2026-04-02"),
        hit("c", 0.7, None),
        hit("d", 0.6, "2026-04-30"),
        hit("e", 0.5, "2026-05-01"),
    ]
    kept, window = apply_window(hits, APRIL, limit=3)
    assert [h.path for h in kept] == ["b", "d", "c"]  # the period's notes, then undated
    assert (window.applied, window.undated, window.outside) == (True, 1, 2)
    kept, window = apply_window(hits, APRIL, limit=2)
    assert [h.path for h in kept] == ["b", "d"] and window.undated == 0


def test_a_window_no_note_is_dated_in_is_said_but_not_applied() -> None:
    hits = [hit("a", 0.9, "2026-03-30"), hit("b", 0.8, None)]
    kept, window = apply_window(hits, APRIL)
    assert kept == hits and window.applied is False


def test_episodic_recall_puts_recent_sessions_first_among_equally_relevant_ones() -> None:
    hits = [
        hit("old", 0.80, "2025-10-01"),
        hit("new", 0.78, "2026-05-01"),
        hit("undated", 0.79, None),
        hit("far", 0.40, "2026-06-01"),  # newest, but a whole step less relevant
    ]
    got = recent_first(hits, sigma=0.1)  # steps of 0.05 below the best
    assert [h.path for h in got] == ["new", "old", "undated", "far"]
    assert recent_first(hits, sigma=None) == hits  # no σ: nothing to compare with


@pytest.mark.parametrize(
    ("question", "alone"),
    [
        ("what did we decide last month?", True),
        ("which decisions did we make in September 2025?", True),
        ("what has happened so far this month?", True),
        ("Mit döntöttünk múlt hónapban?", True),
        ("Mi történt 2025 decemberében?", True),
        ("last week", True),
        ("what did we decide about kafka last month?", False),
        ("how has our code review policy changed since March 2026?", False),
        ("anything new on secrets in the last two weeks?", False),
        ("Mit döntöttünk a gyorsítótárról múlt hónapban?", False),
    ],
)
def test_a_question_about_its_period_alone_is_told_from_one_with_a_topic(
    question: str, alone: bool
) -> None:
    window = parse_window(question, date(2026, 6, 15))
    assert window is not None
    assert only_about(question, window.text) is alone


@pytest.mark.parametrize(
    ("question", "phrase"),
    [
        ("what was the latest work on the warm cache?", "latest"),
        ("what happened at the most recent TSC meeting?", "most recent"),
        ("what did we do most recently about flags?", "most recently"),
        ("the newest notes on billing", "newest"),
        ("what changed recently in the deploy pipeline", "recently"),
        ("when did we last look at kafka?", "did we last"),
        ("when did the TSC last discuss Corepack?", "did the TSC last"),
        ("when was corepack last discussed?", "was corepack last discussed"),
        ("when did we meet last?", "did we meet last"),
        ("what happened at the last TSC meeting?", "the last TSC meeting"),
        ("what happened at the last meeting?", "the last meeting"),
        ("what happened in our last retro", "our last retro"),
        ("last time we discussed secrets", "last time"),
        ("notes from the previous session", "the previous session"),
        ("Mi történt a legutóbbi ügyeleti átadáson?", "legutóbbi"),
        ("Mostanában mit csináltunk a gyorsítótárral?", "Mostanában"),
        ("when was redis last updated?", "was redis last updated"),
        ("which notes were last updated?", "last updated"),
        ("what were the last decisions about kafka?", "the last decisions"),
        ("mit beszéltünk a legutóbbin?", "legutóbbin"),
        ("legutobbi megbeszeles", "legutobbi"),
        ("mi változott nemrégen?", "nemrégen"),
        ("mit csináltunk az utóbbi időben?", "az utóbbi időben"),
        ("mikor beszéltünk utoljára a kafkáról?", "utoljára"),
        ("mi történt az utolsó megbeszélésen?", "utolsó"),
    ],
)
def test_a_question_asking_for_the_latest_is_recognised(question: str, phrase: str) -> None:
    assert asks_latest(question) == phrase


@pytest.mark.parametrize(
    "question",
    [
        "what did we decide last week?",  # a period, not the latest
        "what did we decide last month about secrets",
        "what is the last step of the deploy?",  # an order
        "at last, which cache did we choose?",
        "our last resort when redis is down",
        "the previous decision about redis",  # the one before the current
        "what is our policy on code review?",
        "was it last week that we moved to redis?",  # a period after "was it last"
        "did we last year adopt kafka?",
        "should we pin the :latest docker tag?",  # a tag, not the latest
        "the newest-first ordering bug",
        "which was the last time-series database we tried?",
        "the LRU cache evicts the least recently used entry",
        "a most recently used list",
        "npm install pkg@latest",
        "GET /api/v1/latest returns 404",
        "how do we set the last modified header",
        "when was the last updated field set",
        "was it last May that we moved to redis?",
        "did we last spring adopt kafka?",
        "did we finish the last step?",  # an order, whoever did it
        "have we at last fixed the cache?",
        "did the build pass last night?",
        "how long did the migration last?",  # the verb
        "how long did it last?",
        "did the outage last long?",
        "how long did the outage last yesterday?",
        "did the migration last until friday?",
        "what happened at last week's meeting?",  # a period
        "did our team finish last in the race?",
        "did we make last-minute changes?",  # a compound
        "did the team add last-resort retries?",
        "which step do we do last?",
        "mi az utolsó lépés a telepítésben?",  # an order
    ],
)
def test_last_as_a_period_an_order_or_an_earlier_one_does_not_ask_for_the_latest(
    question: str,
) -> None:
    assert asks_latest(question) is None


def test_the_words_asking_for_the_latest_are_dropped_but_what_it_is_the_latest_of_kept() -> None:
    assert without_latest("what happened in the last retro?").split() == [
        "what", "happened", "in", "retro?",
    ]  # fmt: skip
    assert without_latest("the latest on redis").split() == ["the", "on", "redis"]
    assert without_latest("why redis?") == "why redis?"
    # Who did it last is a topic: "when did Alice last update the runbook" is about Alice.
    assert without_latest("when did Alice last update the runbook").split() == [
        "when", "Alice", "update", "the", "runbook",
    ]  # fmt: skip
    assert without_latest("when was redis last updated?").split() == ["when", "redis", "?"]
    # A retro is a topic; a meeting, like a decision, is what any period question asks for.
    assert not only_about(without_latest("what happened in the last retro?"))
    assert only_about(without_latest("what happened at the last meeting?"))
    assert only_about(without_latest("what did we decide most recently?"))
    assert only_about(without_latest("what did we do last time?"))  # "time" is no topic
    assert only_about(without_latest("mi történt a legutóbbi megbeszélésen?"))
    assert only_about(without_latest("what's the latest?"))
    # A possessive is its word ("Kafka's" is no "what's").
    assert not only_about(without_latest("what's Kafka's latest?"))
    assert not only_about(without_latest("what was Bob's last decision?"))
    assert without_latest("what happened at the last TSC meeting?").split() == [
        "what", "happened", "at", "TSC", "meeting?",
    ]  # fmt: skip
    assert asks_latest("the most\n   recent decision") == "most recent"
    both = without_latest("the latest on the most recent release")
    assert "latest" not in both and "recent" not in both and "release" in both


def test_the_latest_of_a_topic_is_the_newest_of_the_equally_relevant_notes() -> None:
    hits = [
        hit("design", 0.80, "2026-02-03"),
        hit("rollout", 0.78, "2026-03-04"),
        hit("undated", 0.79, None),
        hit("retro", 0.40, "2026-04-15"),  # newest, but a whole step less relevant
    ]
    got = newest_first(hits, 0.1, "2026-06-15", topic=True)
    assert [h.path for h in got] == ["rollout", "design", "undated", "retro"]


def test_the_latest_keeps_every_other_note_in_its_place() -> None:
    """Hybrid's fused order: a note found by its words (a cosine that says little) keeps
    its first place; the notes as relevant as the best gather where the first of them
    stands, so the best one is never pushed past the hits an answer keeps."""
    hits = [
        hit("words", 0.05, "2025-01-01"),
        hit("a", 0.60, "2025-01-01"),
        *(hit(f"w{i}", 0.10, "2026-06-01") for i in range(8)),
        hit("b", 0.58, "2026-03-01"),
    ]
    got = [h.path for h in newest_first(hits, 0.1, "2026-06-15", topic=True)]
    assert got[:4] == ["words", "b", "a", "w0"]
    assert got[4:] == [f"w{i}" for i in range(1, 8)]
    assert newest_first(hits, None, "2026-06-15", topic=True) == hits  # no σ: nothing to do


def test_the_latest_without_a_topic_is_the_newest_note_found_up_to_today() -> None:
    hits = [
        hit("old", 0.80, "2016-02-04"),
        hit("undated", 0.79, None),
        hit("agenda", 0.30, "2026-09-01"),  # next quarter's agenda is no last meeting
        hit("same-day-a", 0.50, "2026-05-06"),
        hit("same-day-b", 0.60, "2026-05-06"),
        hit("newer", 0.30, "2026-05-20"),
    ]
    got = newest_first(hits, None, "2026-06-15", topic=False)
    assert [h.path for h in got] == [
        "newer", "same-day-a", "same-day-b", "old", "undated", "agenda",
    ]  # fmt: skip
