"""Fusing the vectors' and the words' rankings (pipeline/fusion.py)."""

from __future__ import annotations

import pytest

from pipeline.fusion import DENSE_WEIGHT, relative_scores, rrf


def test_scores_are_rescaled_per_ranking_and_weighted() -> None:
    dense = [("a", 0.62), ("b", 0.61), ("c", 0.42)]
    words = [("c", 14.0), ("d", 2.0)]
    # a: .8; b: .8 × .95; c: 0 + .2; d: 0 + 0.
    assert relative_scores([dense, words], [0.8, 0.2]) == ["a", "b", "c", "d"]
    # The words' weight decides whether their best note passes the vectors' best.
    assert relative_scores([dense, words], [0.4, 0.6])[0] == "c"


def test_a_gap_in_scores_matters_where_a_gap_in_ranks_would_not() -> None:
    """Two notes the vectors hold nearly equal stay nearly equal, so the words' vote
    decides between them; reciprocal rank fusion gives the first place's lead whatever the
    gap."""
    dense = [("a", 0.700), ("b", 0.699), ("c", 0.300)]
    words = [("b", 5.0), ("c", 4.0), ("a", 1.0)]
    assert relative_scores([dense, words], [DENSE_WEIGHT, 1 - DENSE_WEIGHT])[0] == "b"
    far = [("a", 0.700), ("b", 0.400), ("c", 0.300)]
    assert relative_scores([far, words], [DENSE_WEIGHT, 1 - DENSE_WEIGHT])[0] == "a"
    assert rrf([[i for i, _ in dense], [i for i, _ in words]])[0] == "b"
    assert rrf([[i for i, _ in far], [i for i, _ in words]])[0] == "b"


def test_one_score_or_equal_scores_count_in_full_and_ties_go_to_the_id() -> None:
    assert relative_scores([[("z", 0.5), ("y", 0.5)], [("x", 3.0)]], [0.5, 0.5]) == [
        "x",
        "y",
        "z",
    ]
    assert relative_scores([[], [("n", 1.0)]], [0.8, 0.2]) == ["n"]
    assert relative_scores([[], []], [0.8, 0.2]) == []


def test_weights_must_match_the_rankings() -> None:
    with pytest.raises(ValueError):
        relative_scores([[("a", 1.0)]], [0.8, 0.2])


def test_a_note_the_vectors_cannot_read_is_scored_by_the_words_alone() -> None:
    """A note in a language the model does not read: its cosine is ignored, and does not
    stretch the vectors' scale; the words' score counts in full."""
    dense = [("en1", 0.60), ("hu", 0.05), ("en2", 0.30)]
    words = [("hu", 9.0), ("en2", 3.0), ("en1", 1.0)]
    # hu: 1.0 by the words in full; en1: .8; en2: .8 × 0 (the vectors' last) + .2 × .25.
    assert relative_scores([dense, words], [0.8, 0.2], {"hu"}) == ["hu", "en1", "en2"]
    # Read by its cosine, hu is last of the vectors and its words' lead is worth .2.
    assert relative_scores([dense, words], [0.8, 0.2]) == ["en1", "en2", "hu"]


def test_a_note_the_vectors_cannot_read_and_the_words_miss_comes_last() -> None:
    dense = [("hu", 0.70), ("en", 0.60), ("en2", 0.50)]
    words = [("en2", 2.0)]
    assert relative_scores([dense, words], [0.8, 0.2], {"hu"}) == ["en", "en2", "hu"]
