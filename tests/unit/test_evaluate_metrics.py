"""Retrieval metrics and ROC AUC against values computed by hand."""

from __future__ import annotations

import math

import pytest

from pipeline.evaluate.metrics import (
    dcg,
    mean_scores,
    mrr_at_k,
    ndcg_at_k,
    rate,
    recall_at_k,
    roc_auc,
)

# d4 (grade 3) is judged but never retrieved; d3 is retrieved but not judged.
JUDGED = {"d1": 2, "d2": 1, "d4": 3, "d5": 0}
RANKED = ["d3", "d1", "d2", "d5"]


def test_dcg_discounts_by_log2_of_rank_plus_one() -> None:
    assert dcg([3, 2, 1]) == pytest.approx(3 / 1 + 2 / math.log2(3) + 1 / 2)


def test_ndcg_uses_graded_linear_gain_and_the_ideal_of_all_judged_documents() -> None:
    # DCG: rank 2 holds grade 2, rank 3 grade 1; the ideal puts 3, 2, 1 at ranks 1-3.
    expected = (2 / math.log2(3) + 1 / 2) / (3 + 2 / math.log2(3) + 1 / 2)
    assert ndcg_at_k(RANKED, JUDGED, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.36999, abs=1e-4)


def test_ndcg_is_one_for_the_ideal_ranking_and_cuts_at_k() -> None:
    assert ndcg_at_k(["d4", "d1", "d2"], JUDGED, 10) == pytest.approx(1.0)
    # At k=1 only rank 1 counts: grade 2 where the ideal has grade 3.
    assert ndcg_at_k(["d1", "d4"], JUDGED, 1) == pytest.approx(2 / 3)
    assert ndcg_at_k(["d3"], JUDGED, 10) == 0.0


def test_recall_counts_only_positive_grades_within_k() -> None:
    relevant = 3  # d1, d2, d4; d5 has grade 0
    assert recall_at_k(RANKED, JUDGED, 10) == pytest.approx(2 / relevant)
    assert recall_at_k(RANKED, JUDGED, 2) == pytest.approx(1 / relevant)
    assert recall_at_k(["d5"], JUDGED, 10) == 0.0


def test_mrr_is_the_reciprocal_rank_of_the_first_relevant_document() -> None:
    assert mrr_at_k(RANKED, JUDGED, 10) == pytest.approx(1 / 2)
    assert mrr_at_k(["d5", "d3", "x", "d2"], JUDGED, 10) == pytest.approx(1 / 4)
    assert mrr_at_k(["d5", "d3", "x", "d2"], JUDGED, 3) == 0.0


def test_mean_scores_average_judged_queries_and_score_missing_runs_as_zero() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 2}, "q3": {"c": 0}}
    runs = {"q1": ["a"], "q3": ["c"]}  # q2 has no run; q3 has no relevant document
    scores = mean_scores(runs, qrels)
    assert scores == {
        "ndcg@10": pytest.approx(0.5),
        "recall@10": pytest.approx(0.5),
        "recall@100": pytest.approx(0.5),
        "mrr@10": pytest.approx(0.5),
    }


def test_recall_at_100_sees_documents_beyond_rank_10() -> None:
    ranked = [f"x{i}" for i in range(20)] + ["a"]
    scores = mean_scores({"q": ranked}, {"q": {"a": 1}})
    assert scores["recall@10"] == 0.0
    assert scores["recall@100"] == 1.0
    assert scores["mrr@10"] == 0.0


def test_auc_counts_ties_as_half() -> None:
    # Pairs (pos, neg): (.9,.5)=1 (.9,.1)=1 (.5,.5)=½ (.5,.1)=1 (.5,.5)=½ (.5,.1)=1 → 5/6.
    assert roc_auc([0.9, 0.5, 0.5], [0.5, 0.1]) == pytest.approx(5 / 6)


def test_auc_is_one_zero_and_half_for_separated_reversed_and_equal_scores() -> None:
    assert roc_auc([3, 4], [1, 2]) == 1.0
    assert roc_auc([1, 2], [3, 4]) == 0.0
    assert roc_auc([1, 1], [1, 1, 1]) == pytest.approx(0.5)


def test_auc_matches_the_pairwise_definition() -> None:
    pos = [0.31, 0.42, 0.42, 0.18, 0.77, 0.5]
    neg = [0.42, 0.12, 0.3, 0.18, 0.05]
    pairwise = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    assert roc_auc(pos, neg) == pytest.approx(pairwise / (len(pos) * len(neg)))


def test_auc_and_rates_are_none_without_data() -> None:
    assert roc_auc([], [0.1]) is None
    assert roc_auc([0.1], []) is None
    assert rate(0, 0) is None
    assert rate(1, 4) == 0.25


def test_answer_scores_grade_subjects_and_count_a_subject_once_in_the_notes() -> None:
    from pipeline.evaluate.metrics import answer_scores, first_occurrences

    judged = {"redis": 2, "warm cache": 1}
    notes = first_occurrences(["redis", "redis", "kafka", "warm cache"])
    assert notes == ("redis", "kafka", "warm cache")
    scores = answer_scores(
        [("kafka", "postgresql", "warm cache", "redis"), ("redis",)],
        [notes, ()],
        [judged, judged],
        [judged, {"redis": 2}],
        answer_grade=2,
    )
    # First question: the answer is 4th (not in the top 3); second: first.
    assert scores["top3_answer"] == 0.5
    assert scores["subject_p@5"] == pytest.approx((2 / 5 + 1 / 5) / 2)
    ideal = 2 + 1 / math.log2(3)
    first = (1 / math.log2(4) + 2 / math.log2(5)) / ideal
    assert scores["subject_ndcg@10"] == pytest.approx((first + 2 / ideal) / 2)
    assert scores["note_ndcg@10"] == pytest.approx(((2 + 1 / math.log2(4)) / ideal + 0) / 2)
    assert answer_scores([], [], [], [], answer_grade=2)["top3_answer"] == 0.0
