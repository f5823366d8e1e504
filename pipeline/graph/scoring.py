"""Exact re-scoring of vector-index candidates: raw cosine, sorted, ties broken by path.

Approximate indexes miss true neighbours and report scores on backend-specific scales (each
backend's ``score_scale``). The client therefore over-fetches candidates, and this module
computes the exact cosine of each stored embedding against the query with numpy, so the hits
and their labels are the same whichever backend served them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from pipeline.graph.records import Candidate, GraphHit

#: What a passage's cosine gives up against a note's own vector: a long note scores
#: max(cos(own vector), cos(best passage) − PASSAGE_DISCOUNT). A section of a hub note
#: otherwise outranks the note that is about the question (a passage is a narrower text,
#: so it meets a question more closely than a whole note does); chosen on the judged sets'
#: tune halves and the long-note collections (docs/long-notes.md).
PASSAGE_DISCOUNT: Final = 0.05


class RowLayout:
    """Where each note's rows are in a matrix of every stored vector (``all_vectors``): its
    own vector first, then a long note's passages, next to each other."""

    def __init__(self, owners: Sequence[str] | range) -> None:
        keys = list(owners)
        first = [r for r, key in enumerate(keys) if r == 0 or key != keys[r - 1]]
        self.starts = np.asarray(first, dtype=np.intp)
        self.ends = np.append(self.starts[1:], len(keys)).astype(np.intp)
        self.passage = np.ones(len(keys), dtype=bool)  # every row after a note's first
        self.passage[self.starts] = False
        self.has_passages = bool(self.passage.any())
        #: What each row gives up against a note's own vector (``note_score``).
        self.discount = np.where(self.passage, PASSAGE_DISCOUNT, 0.0).astype(np.float32)


def note_score(own: float, passages: Iterable[float] = ()) -> float:
    """A note's score from the cosines of its own vector and of its passages."""
    return max([own, *(c - PASSAGE_DISCOUNT for c in passages)])


@dataclass(frozen=True)
class ScoreScale:
    """How one backend's vector index reports similarity: ``cosine = slope·score + intercept``.

    Every scale in use is linear in the cosine, so a positive slope means "higher score is
    nearer" (the index's ORDER BY must be DESC) and a negative one "lower is nearer" (ASC).
    The converted score is only used for a row whose stored embedding is unusable.
    """

    slope: float
    intercept: float
    formula: str  # the score as its backend documents it, e.g. "(1 + cos) / 2"

    def to_cosine(self, score: float) -> float:
        """One index score as a cosine in [-1, 1] (NaN for a non-finite score)."""
        if not math.isfinite(score):
            return float("nan")
        return max(-1.0, min(1.0, self.slope * score + self.intercept))

    def from_cosine(self, cosine: float) -> float:
        """The index score of ``cosine`` (the inverse of ``to_cosine``)."""
        return (cosine - self.intercept) / self.slope

    @property
    def nearest_first(self) -> str:
        """The ORDER BY direction that lists the nearest candidates first."""
        return "DESC" if self.slope > 0 else "ASC"


def as_query_vector(vector: np.ndarray | Sequence[float]) -> np.ndarray:
    """The query as a finite, non-zero 1-D float64 array; ValueError otherwise."""
    array = np.asarray(vector, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"query vector must be 1-D and non-empty, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("query vector has non-finite values")
    if not np.any(array):
        raise ValueError("query vector is all zeros")
    return array


def exact_rescore(
    query: np.ndarray, candidates: Sequence[Candidate], k: int, scale: ScoreScale
) -> list[GraphHit]:
    """The top ``k`` candidates by exact cosine to ``query``, desc, ties broken by path.

    A candidate whose stored embedding is missing or of another length keeps the index's
    own score converted to cosine with ``scale`` (the index knew it under some vector, so it
    is not lost).
    A path that comes back several times (a long note's passages, or a backend returning a
    node twice) is one hit, scored by its best row, a passage's less ``PASSAGE_DISCOUNT``
    (``note_score``).
    """
    if k <= 0 or not candidates:
        return []
    q = np.asarray(query, dtype=np.float64)
    q_norm = float(np.linalg.norm(q))
    scored: list[tuple[float, Candidate]] = []
    rows: list[Sequence[float]] = []
    exact_idx: list[int] = []
    for cand in candidates:
        if cand.embedding is not None and len(cand.embedding) == q.size:
            exact_idx.append(len(scored))
            rows.append(cand.embedding)
            scored.append((float("nan"), cand))
        else:
            scored.append((scale.to_cosine(cand.score) - _discount(cand), cand))
    if rows:
        matrix = np.asarray(rows, dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1) * q_norm
        # einsum, not BLAS: BLAS may round a row's dot product differently depending on its
        # position in the matrix, and a batch search must score exactly like a single one.
        dots = np.einsum("ij,j->i", matrix, q)
        with np.errstate(invalid="ignore", divide="ignore"):
            cosines = np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)
        for i, cos in zip(exact_idx, cosines, strict=True):
            cand = scored[i][1]
            scored[i] = (float(np.clip(cos, -1.0, 1.0)) - _discount(cand), cand)
    best: dict[str, tuple[float, Candidate]] = {}
    for cos, cand in scored:
        if not np.isfinite(cos):
            continue
        kept = best.get(cand.path)
        if kept is None or cos > kept[0]:
            best[cand.path] = (cos, cand)
    usable = sorted(best.values(), key=lambda item: (-item[0], item[1].path))
    return [
        GraphHit(path=c.path, title=c.title, source_type=c.source_type, cosine=cos)
        for cos, c in usable[:k]
    ]


def _discount(candidate: Candidate) -> float:
    return PASSAGE_DISCOUNT if candidate.passage else 0.0
