"""Properties that must hold for every input, checked with hypothesis: ranking is
deterministic and permutation-invariant, corroboration never lowers a score, the relevance
label is monotone in the top cosine and never "strong" on non-finite input, and LIKE and FTS
escaping match any string literally (on a real SQLite file, through KO-DB's own search)."""

from __future__ import annotations

import math
import sqlite3
import string
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.kodb import KoDB
from pipeline.kodb.dialects.sqlite import fts_phrase as _fts_phrase
from pipeline.kodb.match import LIKE_ESCAPE, contains_pattern, reference_search
from pipeline.model import SOURCE_TYPES, Fact, normalize_text
from pipeline.noisefloor import (
    MODERATE,
    NO_MATCH,
    STRONG,
    WEAK,
    clamp_sigma,
    relevance,
)
from pipeline.rank import rank_subject, rank_subjects

LABEL_ORDER = {NO_MATCH: 0, WEAK: 1, MODERATE: 2, STRONG: 3}
CAP = 3

subjects = st.sampled_from(["Redis", "redis", "Kafka", "Warm cache", "Gyorsítótár", "API"])
files = st.sampled_from([f"{d}/{n}.md" for d in ("a", "b", "c") for n in range(6)])
facts_strategy = st.builds(
    Fact,
    subject=subjects,
    predicate=st.sampled_from(["links_to", "tagged", "summary", "has_value", "date"]),
    object=st.text(min_size=1, max_size=8),
    confidence=st.floats(0.0, 1.0),
    source_type=st.sampled_from(SOURCE_TYPES),
    source_file=files,
)


def ranked(facts: list[Fact]) -> list[tuple[object, ...]]:
    out = rank_subjects(facts, top_k=50, facts_per_subject=3, facts_per_predicate_cap=CAP)
    return [
        (
            s.subject,
            s.score,
            s.source_count,
            s.total_facts,
            s.raw_facts,
            s.max_confidence,
            *((f.predicate, f.object, f.source_file) for f in s.facts),
        )
        for s in out
    ]


@given(st.lists(facts_strategy, min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_ranking_is_deterministic_and_independent_of_the_facts_order(
    facts: list[Fact], rnd: object
) -> None:
    shuffled = list(facts)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert ranked(facts) == ranked(list(facts)) == ranked(shuffled)


@given(st.lists(facts_strategy, min_size=1, max_size=30), facts_strategy)
def test_adding_a_corroborating_source_never_lowers_a_subjects_score(
    facts: list[Fact], extra: Fact
) -> None:
    subject_facts = [f for f in facts if f.subject_norm == facts[0].subject_norm]
    corroboration = Fact(
        subject=subject_facts[0].subject,
        predicate=extra.predicate,
        object=extra.object,
        confidence=extra.confidence,
        source_type=extra.source_type,
        source_file="new/" + extra.source_file,  # a file that said nothing about it before
    )

    def score(group: list[Fact]) -> tuple[int, int]:
        r = rank_subject(group, facts_per_subject=3, facts_per_predicate_cap=CAP)
        return r.score, r.source_count

    before, after = score(subject_facts), score([*subject_facts, corroboration])
    assert after[0] >= before[0]
    assert after[1] == before[1] + 1


unit = st.floats(-1.0, 1.0, allow_nan=False)
sigmas = st.floats(0.0, 1.0, allow_nan=False).map(clamp_sigma)
default_ns = st.one_of(st.none(), st.floats(-1.0, 1.0, allow_nan=False))


@given(unit, unit, unit, sigmas, default_ns)
def test_the_label_is_monotone_in_the_top_cosine(
    a: float, b: float, floor: float, sigma: float, default_n: float | None
) -> None:
    low, high = sorted((a, b))
    lo = relevance(low, floor, sigma, default_n).label
    hi = relevance(high, floor, sigma, default_n).label
    assert LABEL_ORDER[lo] <= LABEL_ORDER[hi]


non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
any_float = st.one_of(st.floats(allow_nan=True, allow_infinity=True), non_finite)


@given(
    st.tuples(any_float, any_float, any_float).filter(
        lambda t: not all(math.isfinite(v) for v in t)
    ),
    default_ns,
)
def test_the_label_is_never_strong_on_non_finite_input(
    values: tuple[float, float, float], default_n: float | None
) -> None:
    top, floor, sigma = values
    verdict = relevance(top, floor, sigma, default_n)
    assert verdict.label == NO_MATCH
    # σ from a corrupt calibration is clamped first: still never strong on a NaN top.
    assert relevance(math.nan, 0.2, clamp_sigma(sigma), default_n).label == NO_MATCH


# -- escaping, against a real SQLite -----------------------------------------------------
def ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
text_any = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)


@pytest.fixture(scope="module")
def sqlite_conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path_factory.mktemp("escape") / "escape.db")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(v, tokenize='trigram')")
    yield conn
    conn.close()


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text_any.filter(bool), text_any, text_any, text_any)
def test_like_escaping_matches_any_string_literally(
    sqlite_conn: sqlite3.Connection, term: str, before: str, after: str, other: str
) -> None:
    pattern = contains_pattern(term)
    like = f"SELECT ? LIKE ? ESCAPE '{LIKE_ESCAPE}'"
    assert sqlite_conn.execute(like, (before + term + after, pattern)).fetchone()[0] == 1
    # SQLite's LIKE folds ASCII case only (KO-DB matches case-folded text for that reason).
    expected = ascii_lower(term) in ascii_lower(other)
    assert bool(sqlite_conn.execute(like, (other, pattern)).fetchone()[0]) == expected


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text_any.filter(lambda s: len(s) >= 3), text_any, text_any)
def test_fts_phrase_escaping_matches_any_string_literally(
    sqlite_conn: sqlite3.Connection, term: str, before: str, after: str
) -> None:
    sqlite_conn.execute("DELETE FROM t")
    sqlite_conn.execute("INSERT INTO t(v) VALUES (?), (?)", (before + term + after, "zzz"))
    found = sqlite_conn.execute(
        "SELECT v FROM t WHERE t MATCH ?", ("v:" + _fts_phrase(term),)
    ).fetchall()
    # A trigram phrase is a substring match: the row holding the term, and not the other
    # one (unless the term is in it).
    assert (before + term + after,) in found
    assert (("zzz",) in found) == (ascii_lower(term) in "zzz")


@pytest.fixture(scope="module")
def kodb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KoDB]:
    path: Path = tmp_path_factory.mktemp("search") / "ko.db"
    db = KoDB.open(f"sqlite:///{path}")
    yield db
    db.close()


specials = st.text(st.sampled_from("ab%_\\\"' -éő*()^:"), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(specials, min_size=1, max_size=6, unique=True), specials)
def test_kodb_subject_search_equals_the_reference_scan_for_any_term(
    kodb: KoDB, names: list[str], term: str
) -> None:
    names = [n for n in names if n.strip()]
    if not term.strip() or not names:
        return
    with kodb._tx(write=True) as conn:  # start from an empty store
        conn.exec_driver_sql("DELETE FROM facts")
        conn.exec_driver_sql("DELETE FROM subjects")
    kodb.import_facts([Fact(n, "p", "o", 0.5, "wiki", f"{i}.md") for i, n in enumerate(names)])
    norms = {normalize_text(n).strip() for n in names} | {normalize_text(n) for n in names}
    assert kodb.search_subjects(term) == reference_search(term, kodb.subject_norms())
    assert set(kodb.subject_norms()) <= norms
