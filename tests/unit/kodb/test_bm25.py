"""BM25 as the full-text search orders the notes the database found (kodb/bm25.py)."""

from __future__ import annotations

import math

import pytest

from pipeline.kodb import bm25
from pipeline.kodb.bm25 import Candidate, IndexStats


def stats(notes: int, mean: float, **holding: int) -> IndexStats:
    return IndexStats(notes=notes, mean_words=mean, holding=holding)


def test_a_word_most_notes_hold_still_counts() -> None:
    """FTS5's IDF is all but zero for a word more than half the notes hold; Lucene's is not,
    so the note that also holds the common word wins over a slightly shorter one."""
    common = bm25.idf(10, 8)
    assert 0 < common < bm25.idf(10, 1)
    index = stats(10, 6.0, server=8, crash=2)
    short = Candidate("a.md", "", "the crash log", 3)
    both = Candidate("b.md", "", "the server crash log", 4)
    ranked = bm25.rank([short, both], [("server",), ("crash",)], index, 3.0, 10)
    assert [p for p, _ in ranked] == ["b.md", "a.md"]


def test_the_score_is_lucene_bm25_with_title_words_weighted() -> None:
    index = stats(4, 5.0, okapi=2)
    note = Candidate("n.md", "okapi", "an okapi grazes here", 5)
    tf = 3.0 * 1 + 1  # the title's occurrence weighs three body ones
    idf = math.log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    expected = idf * tf * (1.5 + 1) / (tf + 1.5 * (1 - 0.75 + 0.75 * 5 / 5.0))
    assert bm25.score(note, [("okapi",)], index, 3.0) == pytest.approx(expected)


def test_every_occurrence_of_a_whole_word_counts_adjacent_ones_too() -> None:
    index = stats(4, 3.0, cach=2)
    once = bm25.score(Candidate("a.md", "", "cach x y", 3), [("cach",)], index, 1.0)
    twice = bm25.score(Candidate("b.md", "", "cach cach y", 3), [("cach",)], index, 1.0)
    thrice = bm25.score(Candidate("c.md", "", "cach cach cach", 3), [("cach",)], index, 1.0)
    assert 0 < once < twice < thrice
    # A title "Kafka" with its alias "kafka": two title words, each worth three.
    both = bm25.score(
        Candidate("k.md", "kafka kafka", "", 2), [("kafka",)], stats(4, 3.0, kafka=1), 3.0
    )
    one = bm25.score(Candidate("k.md", "kafka x", "", 2), [("kafka",)], stats(4, 3.0, kafka=1), 3.0)
    assert both > one
    assert bm25.score(Candidate("d.md", "", "cached", 1), [("cach",)], index, 1.0) == 0


def test_ties_go_to_the_path_and_the_limit_cuts_after_ordering() -> None:
    index = stats(5, 2.0, okapi=3)
    notes = [Candidate(p, "", "okapi herd", 2) for p in ("c.md", "a.md", "b.md")]
    best = Candidate("z.md", "okapi", "okapi herd", 3)
    ranked = bm25.rank([*notes, best], [("okapi",)], index, 3.0, 3)
    assert [p for p, _ in ranked] == ["z.md", "a.md", "b.md"]
    assert ranked[0][1] > ranked[1][1] == ranked[2][1] > 0


def test_a_word_no_note_holds_and_a_note_without_the_words_score_nothing() -> None:
    index = stats(3, 2.0, okapi=1)
    assert bm25.score(Candidate("a.md", "", "zebra", 1), [("okapi",), ("gnu",)], index, 3.0) == 0
    assert bm25.rank([Candidate("a.md", "", "zebra", 1)], [("okapi",)], index, 3.0, 5) == []


def test_a_word_spelled_once_per_language_is_one_term_as_common_as_its_commonest_spelling() -> None:
    """English notes index "flags" as "flag"; the Hungarian stemmer leaves it whole, so only
    the two Hungarian notes quoting it hold "flags". Scored as two words, "flags" was rare
    and those notes outranked the English ones about flags."""
    index = stats(20, 4.0, flag=8, flags=2)
    english = Candidate("en.md", "", "feature flag rollout", 3)
    quoting = Candidate("hu.md", "", "a flags kapcsolo", 3)
    term = [("flag", "flags")]
    assert bm25.score(english, term, index, 3.0) == pytest.approx(
        bm25.score(quoting, term, index, 3.0)
    )
    assert bm25.score(quoting, term, index, 3.0) < bm25.score(quoting, [("flags",)], index, 3.0)
    # The spellings of one occurrence (an accented word and its plain stem) count once.
    accented = Candidate("a.md", "", "adatbazis adatbazisbol x", 3)
    plain = Candidate("p.md", "", "adatbazis y z", 3)
    both = stats(20, 3.0, adatbazis=5, adatbazisbol=3)
    group = [("adatbazisbol", "adatbazis")]
    assert bm25.score(accented, group, both, 1.0) == pytest.approx(
        bm25.score(plain, group, both, 1.0)
    )


def test_every_keeps_only_the_notes_holding_each_term_in_one_of_its_spellings() -> None:
    index = stats(10, 4.0, server=3, crash=2, gyorsitotar=1, gyorsitotark=1)
    short = Candidate("a.md", "", "the crash log", 3)
    both = Candidate("b.md", "server", "a crash", 3)
    spelt = Candidate("c.md", "", "server gyorsitotark crash", 3)
    wanted = [("server",), ("crash",)]
    ranked = bm25.rank([short, both, spelt], wanted, index, 3.0, 10, every=True)
    assert [p for p, _ in ranked] == ["b.md", "c.md"]
    cache = [("gyorsitotar", "gyorsitotark"), ("crash",)]  # one term, two spellings
    assert bm25.holds_every(spelt, cache) and not bm25.holds_every(both, cache)
