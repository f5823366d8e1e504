"""Subject matching semantics (pure Python): word boundaries, normalisation, LIKE escaping."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import InputError
from pipeline.kodb import (
    contains_pattern,
    escape_like,
    normalize_term,
    reference_search,
    word_boundary_match,
)
from pipeline.model import normalize_text


@pytest.mark.parametrize(
    ("term", "subject", "expected"),
    [
        ("warm", "warm cache", True),
        ("warm", "warmstart", False),
        ("warm", "prewarm", False),
        ("warm", "warmstart and warm cache", True),  # a later occurrence is delimited
        ("warm", "warm_cache", False),  # "_" is a word character
        ("warm", "warm-cache", True),
        ("warm", "(warm)", True),
        ("gyorsítótár", "a gyorsítótár őrző", True),
        ("őrző", "gyorsítótár őrző", True),
        ("őr", "gyorsítótár őrző", False),  # "z" after "őr" is a word character
        ("tár", "gyorsítótár", False),  # "ó" before "tár" is a word character
        ("aa", "aaa aa", True),
        ("aa", "aaa", False),
        ("c++", "c++ guide", True),
        ("c++", "c++x", False),
        ("50%", "50% off", True),
        ("", "anything", False),
    ],
)
def test_word_boundary_match_checks_every_occurrence_with_unicode_word_chars(
    term: str, subject: str, expected: bool
) -> None:
    assert word_boundary_match(term, subject) is expected


def test_normalize_term_casefolds_and_strips() -> None:
    assert normalize_term("  ŐRZŐ ") == "őrző"
    assert normalize_term("Straße") == "strasse"


@pytest.mark.parametrize("term", ["", "   ", "\t\n"])
def test_empty_term_is_an_input_error(term: str) -> None:
    with pytest.raises(InputError):
        normalize_term(term)
    with pytest.raises(InputError):
        reference_search(term, ["x"])


def test_escape_like_escapes_wildcards_and_the_escape_char() -> None:
    assert escape_like("50%_a\\b") == "50\\%\\_a\\\\b"
    assert contains_pattern("a%") == "%a\\%%"


def _like_to_regex(pattern: str, escape: str = "\\") -> re.Pattern[str]:
    """An independent reading of LIKE semantics, to check the escaping round-trips."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


@settings(max_examples=300, deadline=None)
@given(term=st.text(min_size=1, max_size=12), subject=st.text(max_size=30))
def test_contains_pattern_matches_exactly_the_substring_relation(term: str, subject: str) -> None:
    regex = _like_to_regex(contains_pattern(term))
    assert (regex.fullmatch(subject) is not None) == (term in subject)


_ALPHABET = st.sampled_from(list("ab őűéá_-%'\"\\.1Ő"))


@settings(max_examples=500, deadline=None)
@given(term=st.text(_ALPHABET, min_size=1, max_size=4), subject=st.text(_ALPHABET, max_size=20))
def test_word_boundary_match_agrees_with_a_lookaround_regex(term: str, subject: str) -> None:
    # Lookarounds try every start position, so the regex is an independent oracle for
    # "some occurrence is delimited by non-word characters".
    oracle = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", subject) is not None
    assert word_boundary_match(term, subject) is oracle


def test_reference_search_returns_sorted_distinct_matches_and_honours_limit() -> None:
    subjects = [normalize_text(s) for s in ["Warm cache", "warmstart", "Cache, warm", "warm"]]
    assert reference_search("WARM", subjects + subjects) == ["cache, warm", "warm", "warm cache"]
    assert reference_search("warm", subjects, limit=2) == ["cache, warm", "warm"]
