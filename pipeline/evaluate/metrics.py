"""Retrieval and separation metrics, pure functions over ranked ids and judgements.

Conventions (those of trec_eval, which BEIR reports through pytrec_eval):

* nDCG@k uses linear gain: a document of grade g at rank i adds g / log2(i + 1); the ideal
  ranking sorts every judged document of the query by grade, so relevant documents the
  system could not retrieve still lower the score.
* recall@k = relevant documents in the top k / all relevant documents of the query.
* MRR@k = 1 / rank of the first relevant document within the top k, else 0.
* Only grades > 0 are relevant; a query without relevant documents is not averaged.
* ROC AUC in the Mann-Whitney form: P(positive score > negative score) + ½ P(equal).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
#: Answer quality: the subjects a person reads, with the note hits' nDCG beside them.
ANSWER_METRICS = ("subject_ndcg@10", "subject_p@5", "top3_answer", "note_ndcg@10")


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of gains listed in rank order (rank 1 first)."""
    return float(sum(g / math.log2(i + 2) for i, g in enumerate(gains)))


def ndcg_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """nDCG@k of one ranking with graded judgements (linear gain)."""
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return 0.0
    gains = [max(judged.get(doc, 0), 0) for doc in ranked[:k]]
    return dcg(gains) / dcg(ideal)


def recall_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Share of the query's relevant documents found in the top k."""
    relevant = {d for d, g in judged.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document within the top k (0 if none)."""
    for i, doc in enumerate(ranked[:k], start=1):
        if judged.get(doc, 0) > 0:
            return 1.0 / i
    return 0.0


def precision_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    """Share of the first k positions holding a relevant item (a short list still counts k)."""
    if k <= 0:
        return 0.0
    return sum(1 for item in ranked[:k] if judged.get(item, 0) > 0) / k


def answered_in_top(ranked: Sequence[str], judged: Mapping[str, int], k: int, grade: int) -> bool:
    """Whether one of the first k items has at least ``grade`` (it answers the question)."""
    return any(judged.get(item, 0) >= grade for item in ranked[:k])


def first_occurrences(items: Iterable[str]) -> tuple[str, ...]:
    """The items in order with repeats dropped: an item is counted once, where first seen."""
    return tuple(dict.fromkeys(items))


def answer_scores(
    subject_runs: Sequence[Sequence[str]],
    note_runs: Sequence[Sequence[str]],
    subject_qrels: Sequence[Mapping[str, int]],
    note_qrels: Sequence[Mapping[str, int]],
    *,
    answer_grade: int,
) -> dict[str, float]:
    """``ANSWER_METRICS`` averaged over questions (runs and judgements in the same order).

    ``top3_answer`` is the share of questions whose first three subjects hold one of grade
    ``answer_grade`` or more. A question whose notes can hold nothing judged (every judged
    subject lacks a note) scores 0 on ``note_ndcg@10``, like an empty ranking.
    """
    n = len(subject_runs)
    if not n:
        return dict.fromkeys(ANSWER_METRICS, 0.0)
    totals = dict.fromkeys(ANSWER_METRICS, 0.0)
    for subjects, notes, s_judged, n_judged in zip(
        subject_runs, note_runs, subject_qrels, note_qrels, strict=True
    ):
        totals["subject_ndcg@10"] += ndcg_at_k(subjects, s_judged, 10)
        totals["subject_p@5"] += precision_at_k(subjects, s_judged, 5)
        totals["top3_answer"] += answered_in_top(subjects, s_judged, 3, answer_grade)
        totals["note_ndcg@10"] += ndcg_at_k(notes, n_judged, 10)
    return {name: totals[name] / n for name in ANSWER_METRICS}


def retrieval_scores(ranked: Sequence[str], judged: Mapping[str, int]) -> dict[str, float]:
    """The four metrics of the report for one query."""
    return {
        "ndcg@10": ndcg_at_k(ranked, judged, 10),
        "recall@10": recall_at_k(ranked, judged, 10),
        "recall@100": recall_at_k(ranked, judged, 100),
        "mrr@10": mrr_at_k(ranked, judged, 10),
    }


def mean_scores(
    runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """The four metrics averaged over the queries that have a relevant document.

    ``runs`` maps a query id to its ranked document ids; a judged query missing from
    ``runs`` counts as an empty ranking (it scores 0), never as skipped.
    """
    judged_ids = [q for q, judged in qrels.items() if any(g > 0 for g in judged.values())]
    if not judged_ids:
        return dict.fromkeys(METRICS, 0.0)
    totals = dict.fromkeys(METRICS, 0.0)
    for q in judged_ids:
        for name, value in retrieval_scores(runs.get(q, ()), qrels[q]).items():
            totals[name] += value
    return {name: totals[name] / len(judged_ids) for name in METRICS}


def roc_auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """ROC AUC of scores meant to be higher for positives; ties count ½. None if a side is empty.

    Computed from average ranks (Mann-Whitney U), so it costs a sort, not n×m comparisons.
    """
    pos = np.asarray(positives, dtype=np.float64)
    neg = np.asarray(negatives, dtype=np.float64)
    if pos.size == 0 or neg.size == 0:
        return None
    scores = np.concatenate([pos, neg])
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    # Rank of a group of equal values = the mean of the 1-based positions it occupies.
    ends = np.cumsum(counts)
    mean_rank = ends - (counts - 1) / 2.0
    ranks = mean_rank[inverse]
    u = ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2.0
    return float(u / (pos.size * neg.size))


def rate(count: int, total: int) -> float | None:
    """count / total, or None when there is nothing to divide by."""
    return count / total if total else None
