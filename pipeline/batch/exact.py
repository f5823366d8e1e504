"""Exact search over every note vector, for batches that read the vectors once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

from pipeline.graph.backends import score_scale
from pipeline.graph.records import Candidate
from pipeline.graph.scoring import RowLayout, exact_rescore
from pipeline.model import Hit

#: The shortlist keeps every note whose float32 cosine is within this of the k-th best: far
#: above float32 rounding (≈1e-6 for 384 dims), so the true top k is always in it.
SHORTLIST_SLACK: Final = 1e-4


class ExactSearch:
    """Every note vector of the graph, searched exactly: one matrix product per chunk picks a
    shortlist per prompt (the k best plus near-ties), and ``scoring.exact_rescore`` — the
    graph client's own re-scoring — gives the cosines, the order and the tie-break by path.

    So hits equal ``GraphClient.vector_search`` whenever the index's over-fetch holds the
    true top k (with ~70 notes and 800 candidates, always). Titles and source types come
    from the KO-DB registry for notes whose content hash matches the graph's; a prompt
    whose hits include another note is searched on the index instead.
    """

    def __init__(
        self,
        paths: Sequence[str],
        titles: Sequence[str | None],
        source_types: Sequence[str | None],
        matrix: np.ndarray,
        dialect: str = "neo4j",
    ) -> None:
        self.paths = list(paths)
        self.titles = list(titles)
        self.source_types = list(source_types)
        self.dialect = dialect
        self.matrix = np.asarray(matrix, dtype=np.float32)
        norms = np.linalg.norm(self.matrix, axis=1) if len(self.paths) else np.zeros(0)
        self._inv_norms = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
        # A long note has a row per passage (``all_vectors``), scored less the discount; a
        # note scores by its best row.
        rows = RowLayout(self.paths)
        self._starts, self._ends = rows.starts, rows.ends
        self._passage, self._discount = rows.passage, rows.discount

    @property
    def notes(self) -> int:
        """How many notes the rows hold (a long note has several rows)."""
        return int(self._starts.size)

    @classmethod
    def load(cls, graph: Any, kodb: Any) -> ExactSearch:
        """Read all vectors (one round trip) and the registry (one statement)."""
        states, matrix = graph.all_vectors()
        notes = kodb.notes()
        titles: list[str | None] = []
        types: list[str | None] = []
        for state in states:
            note = notes.get(state.path)
            same = note is not None and note.content_hash == state.content_hash
            titles.append(note.title if same and note else None)
            types.append(note.source_type if same and note else None)
        dialect = str(getattr(graph, "dialect", "neo4j"))
        return cls([s.path for s in states], titles, types, matrix, dialect)

    @property
    def dims(self) -> int:
        return int(self.matrix.shape[1]) if self.matrix.ndim == 2 and len(self.paths) else 0

    def shortlist_scores(self, queries: np.ndarray) -> np.ndarray:
        """(n prompts × N rows) float32 scores (cosines, a passage's less the discount):
        only for choosing shortlists."""
        q = np.asarray(queries, dtype=np.float32)
        q_norms = np.linalg.norm(q, axis=1)
        q_inv = np.where(q_norms > 0, 1.0 / np.where(q_norms > 0, q_norms, 1.0), 0.0)
        cosines = (q @ self.matrix.T) * q_inv[:, None].astype(np.float32)
        return cosines * self._inv_norms[None, :] - self._discount[None, :]

    def _row(self, i: int) -> np.ndarray:
        # The stored float32 vector as float64, as the graph returns it: an array, not a
        # tuple of Python floats (the re-score stacks the rows; tuples kept per note cost
        # 12 KB each in a service that runs for weeks).
        return self.matrix[i].astype(np.float64)

    def search_many(
        self,
        vectors: np.ndarray,
        k: int,
        fallback: Callable[[np.ndarray, int], list[Hit]],
    ) -> list[list[Hit]]:
        """The k best notes of every row: one matrix product, then each row's shortlist
        re-scored; a row whose hits the registry cannot name (or a degenerate row) goes to
        ``fallback`` (the graph's own search)."""
        scores = self.shortlist_scores(vectors)
        out: list[list[Hit]] = []
        for vector, row in zip(vectors, scores, strict=True):
            usable = bool(np.isfinite(row).all() and np.any(vector))
            hits = self.top_k(vector, row, k) if usable else None
            out.append(hits if hits is not None else fallback(vector, k))
        return out

    def top_k(self, query: np.ndarray, scores: np.ndarray, k: int) -> list[Hit] | None:
        """The k best notes for one prompt (``scores``: its shortlist row); None when one of
        them has no registry title."""
        if k <= 0 or not self.paths:
            return []
        best = np.maximum.reduceat(scores, self._starts) if scores.size else scores
        if k < best.size:
            kth = best[np.argpartition(-best, k - 1)[k - 1]]
            near = np.flatnonzero(best >= kth - SHORTLIST_SLACK)
            idx = np.concatenate([np.arange(self._starts[n], self._ends[n]) for n in near.tolist()])
        else:
            idx = np.arange(scores.size)
        candidates = [
            Candidate(
                self.paths[i],
                self.titles[i] or "",
                self.source_types[i] or "",
                self._row(i),
                float("nan"),
                bool(self._passage[i]),
            )
            for i in sorted(idx.tolist(), key=self.paths.__getitem__)
        ]
        query64 = np.asarray(query, dtype=np.float64)
        ranked = exact_rescore(query64, candidates, k, score_scale(self.dialect))
        position = {self.paths[i]: i for i in idx.tolist()}
        hits: list[Hit] = []
        for h in ranked:
            i = position[h.path]
            if self.titles[i] is None or self.source_types[i] is None:
                return None
            hits.append(Hit(h.path, h.title, h.source_type, h.cosine))  # type: ignore[arg-type]
        return hits
