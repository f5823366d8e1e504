"""Exact search over every note vector: the true top k, ties by path, deferring to the graph."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.batch.exact import ExactSearch
from pipeline.graph.scoring import PASSAGE_DISCOUNT

DIMS = 8


def test_exact_search_finds_the_true_top_k_with_ties_broken_by_path() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((40, DIMS)).astype(np.float32)
    vectors[7] = vectors[3]  # an exact tie, broken by path
    vectors[12] = 0.0  # a zero vector scores 0, as in exact_rescore
    paths = [f"n/{i:02d}.md" for i in range(40)][::-1]  # not in path order
    exact = ExactSearch(paths, [f"T{i}" for i in range(40)], ["wiki"] * 40, vectors)
    queries = np.vstack([vectors[3], rng.standard_normal((5, DIMS))]).astype(np.float32)
    scores = exact.shortlist_scores(queries)
    m = vectors.astype(np.float64)
    for qi, q in enumerate(queries):
        q64 = q.astype(np.float64)
        norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q64)
        cos = np.where(norms > 0, np.einsum("ij,j->i", m, q64) / np.where(norms > 0, norms, 1), 0)
        # reference: cosines equal to 12 digits count as ties, decided by path
        reference = sorted(range(40), key=lambda i: (-round(float(cos[i]), 12), paths[i]))
        for k in (1, 5, 20, 40, 60):
            got = exact.top_k(q, scores[qi], k)
            assert got is not None
            assert [h.path for h in got] == [paths[i] for i in reference[:k]]
            assert [h.title for h in got] == [f"T{i}" for i in reference[:k]]
            assert [h.cosine for h in got] == pytest.approx([cos[i] for i in reference[:k]])


def test_exact_search_defers_to_the_graph_when_the_registry_cannot_name_a_hit() -> None:
    vectors = np.eye(3, DIMS, dtype=np.float32)
    exact = ExactSearch(["a.md", "b.md", "c.md"], ["A", None, "C"], ["wiki", None, "adr"], vectors)
    scores = exact.shortlist_scores(vectors[:1])[0]
    assert exact.top_k(vectors[0], scores, 1) is not None
    assert exact.top_k(vectors[0], scores, 3) is None  # b.md has no registry title


def test_a_long_note_with_several_rows_is_one_hit_scored_by_its_best_row() -> None:
    rng = np.random.default_rng(5)
    base = rng.standard_normal((12, DIMS)).astype(np.float32)
    # long.md has four rows in a row (its own and three passages), as all_vectors gives them
    paths = ["a.md", "b.md", "c.md", "long.md", "long.md", "long.md", "long.md"]
    paths += [f"z{i}.md" for i in range(5)]
    exact = ExactSearch(paths, ["T"] * 12, ["wiki"] * 12, base)
    assert exact.notes == 9
    query = base[5]  # long.md's second passage (its rows: 3 own, 4–6 passages)
    got = exact.top_k(query, exact.shortlist_scores(query[None, :])[0], 3)
    assert got is not None
    # Its passage's cosine, less the discount a passage gives up against a note's own vector.
    assert got[0].path == "long.md" and got[0].cosine == pytest.approx(1.0 - PASSAGE_DISCOUNT)
    assert len({h.path for h in got}) == 3  # k distinct notes, not k rows of one note
    every = exact.top_k(query, exact.shortlist_scores(query[None, :])[0], 20)
    assert every is not None and sorted(h.path for h in every) == sorted(set(paths))
