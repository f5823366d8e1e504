"""Reciprocal rank fusion: one ranking of notes from several (hybrid retrieval).

A note's fused score is the sum, over the rankings that hold it, of ``weight / (k + rank)``
(rank 1 first); the fused ranking sorts by that score, ties by path. Scores of different
searchers (a cosine, a BM25 value) never meet: only ranks do, which is why RRF needs no
calibration between them (Cormack, Clarke and Büttcher, SIGIR 2009).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

#: The constant of the original paper, which peers (Elasticsearch, Weaviate, Graphiti) use;
#: bench/retrieval_rules.py compared the alternatives (docs/degraded-mode.md, "Hybrid
#: retrieval").
RRF_K: Final = 60


def rrf(
    rankings: Sequence[Sequence[str]],
    *,
    k: float = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[str]:
    """The fused ranking of these rankings (each best first, ids unique within one)."""
    scores: dict[str, float] = {}
    for i, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[i]
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda item: (-scores[item], item))
