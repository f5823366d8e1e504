"""One ranking of notes from several (hybrid retrieval): by their scores, or by their ranks.

Hybrid retrieval fuses by relative scores (``relative_scores``): each ranking's scores are
rescaled to 0..1 over the notes it found (its best 1, its last 0), a note it did not find
counts 0 there, and a note's fused score is the weighted sum (the fusion Weaviate calls
``relativeScoreFusion``). Unlike ranks, scores keep how far apart two notes are: a note the
vectors place eleventh by a hair keeps nearly the first's score, and a note the words find
only weakly gains little. Measured on seven collections, it is above both dense and the
BM25 yardstick on every one, where reciprocal rank fusion lost to dense on the two
paraphrased ones
(docs/degraded-mode.md, "Hybrid retrieval"; bench/retrieval_rules.py).

Reciprocal rank fusion (``rrf``) stays as the bench's comparison: a note's fused score is
the sum, over the rankings that hold it, of ``weight / (k + rank)`` (Cormack, Clarke and
Büttcher, SIGIR 2009).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

#: The constant of the original paper, which peers (Elasticsearch, Weaviate, Graphiti) use.
RRF_K: Final = 60

#: The vectors' share of a relative-score fusion, the words' the rest: the share whose worst
#: collection fell least short of that collection's better retrieval (bench/retrieval_rules.py).
DENSE_WEIGHT: Final = 0.8


def relative_scores(
    rankings: Sequence[Sequence[tuple[str, float]]],
    weights: Sequence[float],
    unjudged: Collection[str] = (),
) -> list[str]:
    """The fused ranking of these scored rankings ((id, score), larger is better, ids
    unique within one): each ranking's scores rescaled to 0..1 over its own ids (all equal:
    1), an id it lacks counting 0, summed by ``weights``; ties by id.

    ``unjudged`` ids are ones the first ranking cannot judge (hybrid retrieval: notes in a
    language the embedder does not read): its scores of them are ignored (nor do they bound
    its scale), and the other rankings alone score them, their weights rescaled to sum to
    1; one that only the first ranking holds scores 0."""
    fused: dict[str, float] = {}
    blind = set(unjudged)
    rest = sum(weights[1:])
    for i, (ranking, weight) in enumerate(zip(rankings, weights, strict=True)):
        if i == 0 and blind:
            fused.update((item, 0.0) for item, _ in ranking if item in blind)
            ranking = [(item, score) for item, score in ranking if item not in blind]
        if not ranking:
            continue
        values = [score for _, score in ranking]
        low, high = min(values), max(values)
        for item, score in ranking:
            share = (score - low) / (high - low) if high > low else 1.0
            w = weight / rest if i > 0 and item in blind and rest > 0 else weight
            fused[item] = fused.get(item, 0.0) + w * share
    return sorted(fused, key=lambda item: (-fused[item], item))


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
