"""Dialect detection, each backend's score scale, and exact re-scoring."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.errors import ConfigError
from pipeline.graph.backends import score_scale
from pipeline.graph.dialects import ARCADEDB, DIALECTS, MEMGRAPH, NEO4J, detect_dialect
from pipeline.graph.records import Candidate
from pipeline.graph.scoring import PASSAGE_DISCOUNT, as_query_vector, exact_rescore, note_score

#: What each server really sends as its Bolt agent (``driver.get_server_info().agent``).
REAL_AGENTS = [
    # Memgraph's default since v2.19 (flag --bolt-server-name-for-init): it claims Neo4j
    # compatibility first and names itself last.
    ("Neo4j/v5.11.0 compatible graph database server - Memgraph", MEMGRAPH),
    # A Memgraph started with --bolt-server-name-for-init=Memgraph/3.10.1 (and pre-2.19 ones).
    ("Memgraph/3.10.1", MEMGRAPH),
    ("Neo4j/5.26.0", NEO4J),
    ("Neo4j/2025.01.0", NEO4J),
    # The pinned arcadedb-embedded 26.10.2 server, read from it over Bolt (the integration
    # test test_server_is_detected_as_arcadedb checks the running server still says this).
    ("Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)", ARCADEDB),
]


@pytest.mark.parametrize(("agent", "dialect"), REAL_AGENTS)
def test_dialect_is_detected_from_the_real_bolt_agents(agent: str, dialect: str) -> None:
    assert detect_dialect(agent) == dialect


def test_memgraph_is_recognised_before_its_neo4j_compatibility_claim() -> None:
    assert detect_dialect("Neo4j/v5.11.0 compatible graph database server - Memgraph") != NEO4J


def test_configured_dialect_overrides_the_agent() -> None:
    assert detect_dialect("Neo4j/5.26.0", "Memgraph") == MEMGRAPH
    assert detect_dialect(None, "arcadedb") == ARCADEDB
    assert detect_dialect("FalkorDB/4.2", "neo4j") == NEO4J


@pytest.mark.parametrize("agent", ["FalkorDB/4.2.0", "", None, "neo4j-compatible server"])
def test_an_agent_naming_no_known_server_asks_for_graph_dialect(agent: str | None) -> None:
    with pytest.raises(ConfigError, match="set graph_dialect") as info:
        detect_dialect(agent)
    assert "memgraph, neo4j, arcadedb" in str(info.value)


def test_an_unknown_configured_dialect_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown graph dialect 'sql'"):
        detect_dialect("Neo4j/5.26.0", "sql")


@pytest.mark.parametrize(
    ("dialect", "cosine", "score"),
    [
        # Neo4j and ArcadeDB: (1 + cos) / 2.
        (NEO4J, 1.0, 1.0),
        (NEO4J, 0.0, 0.5),
        (NEO4J, -1.0, 0.0),
        (ARCADEDB, 0.6, 0.8),
        (ARCADEDB, -0.2, 0.4),
        # Memgraph, metric "cos": distance = 1 - cos (its |cos| similarity loses the sign).
        (MEMGRAPH, 1.0, 0.0),
        (MEMGRAPH, 0.25, 0.75),
        (MEMGRAPH, -0.5, 1.5),
    ],
)
def test_score_scales_convert_to_raw_cosine(dialect: str, cosine: float, score: float) -> None:
    assert score_scale(dialect).from_cosine(cosine) == pytest.approx(score)
    assert score_scale(dialect).to_cosine(score) == pytest.approx(cosine)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_score_conversion_round_trips_and_keeps_the_sign(dialect: str) -> None:
    scale = score_scale(dialect)
    cosines = np.linspace(-1.0, 1.0, 41)
    back = [scale.to_cosine(scale.from_cosine(float(c))) for c in cosines]
    np.testing.assert_allclose(back, cosines, atol=1e-12)


@pytest.mark.parametrize(
    ("dialect", "direction"), [(NEO4J, "DESC"), (ARCADEDB, "DESC"), (MEMGRAPH, "ASC")]
)
def test_nearest_first_follows_the_score_scale(dialect: str, direction: str) -> None:
    scale = score_scale(dialect)
    assert scale.nearest_first == direction
    near, far = scale.from_cosine(0.9), scale.from_cosine(0.1)
    assert (near > far) == (direction == "DESC")


def test_converted_cosine_is_clamped_and_nan_safe() -> None:
    assert score_scale(NEO4J).to_cosine(1.0000001) == 1.0
    assert np.isnan(score_scale(MEMGRAPH).to_cosine(float("nan")))


def _cand(path: str, emb: list[float] | None, score: float = 0.5) -> Candidate:
    return Candidate(path, f"title {path}", "wiki", None if emb is None else tuple(emb), score)


def test_exact_rescore_matches_numpy_and_sorts_by_cosine() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((30, 16)).astype(np.float32)
    query = rng.standard_normal(16)
    # The index order (and its scores) are deliberately wrong: re-scoring must not trust them.
    cands = [_cand(f"n{i:02d}", vectors[i].tolist(), score=0.9) for i in range(30)]
    hits = exact_rescore(query, cands[::-1], 5, score_scale(ARCADEDB))
    expected = vectors.astype(np.float64) @ query
    expected /= np.linalg.norm(vectors.astype(np.float64), axis=1) * np.linalg.norm(query)
    order = np.argsort(-expected)[:5]
    assert [h.path for h in hits] == [f"n{i:02d}" for i in order]
    np.testing.assert_allclose([h.cosine for h in hits], expected[order], rtol=0, atol=1e-12)


def test_ties_are_broken_by_path() -> None:
    same = [1.0, 0.0, 0.0]
    cands = [_cand(p, same) for p in ("c.md", "a.md", "b.md")] + [_cand("z.md", [0.0, 1.0, 0.0])]
    hits = exact_rescore(np.array([1.0, 0.0, 0.0]), cands, 3, score_scale(NEO4J))
    assert [h.path for h in hits] == ["a.md", "b.md", "c.md"]
    assert all(h.cosine == pytest.approx(1.0) for h in hits)


def test_unusable_embedding_keeps_the_converted_index_score() -> None:
    cands = [
        _cand("no-embedding.md", None, score=0.2),  # memgraph distance 0.2 -> cos 0.8
        _cand("wrong-size.md", [1.0, 0.0], score=1.5),  # -> cos -0.5
        _cand("exact.md", [0.0, 1.0, 0.0]),
    ]
    hits = exact_rescore(np.array([1.0, 0.0, 0.0]), cands, 3, score_scale(MEMGRAPH))
    assert [(h.path, round(h.cosine, 6)) for h in hits] == [
        ("no-embedding.md", 0.8),
        ("exact.md", 0.0),
        ("wrong-size.md", -0.5),
    ]


def test_duplicate_rows_count_once_and_k_cuts() -> None:
    cands = [_cand("a.md", [1.0, 0.0]), _cand("a.md", [1.0, 0.0]), _cand("b.md", [0.0, 1.0])]
    hits = exact_rescore(np.array([1.0, 0.2]), cands, 5, score_scale(NEO4J))
    assert [h.path for h in hits] == ["a.md", "b.md"]
    assert exact_rescore(np.array([1.0, 0.2]), cands, 1, score_scale(NEO4J))[0].path == "a.md"
    assert exact_rescore(np.array([1.0, 0.2]), cands, 0, score_scale(NEO4J)) == []


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], [0.0, 0.0], [1.0, float("nan")]])
def test_invalid_query_vectors_are_refused(bad: list) -> None:
    with pytest.raises(ValueError):
        as_query_vector(bad)


def test_a_note_found_by_several_rows_is_one_hit_its_passages_less_the_discount() -> None:
    scale = score_scale(NEO4J)
    rows = [
        Candidate("long.md", "L", "wiki", (0.0, 1.0), float("nan")),  # its own: cos 0
        Candidate("short.md", "S", "wiki", (1.0, 1.0), float("nan")),  # cos 0.707
        Candidate("long.md", "L", "wiki", (1.0, 0.1), float("nan"), passage=True),  # 0.995
        Candidate("mid.md", "M", "wiki", (1.0, 0.6), float("nan")),  # cos 0.857
        Candidate("mid.md", "M", "wiki", (1.0, 0.45), float("nan"), passage=True),  # 0.912
    ]
    hits = exact_rescore(np.array([1.0, 0.0]), rows, 5, scale)
    assert [h.path for h in hits] == ["long.md", "mid.md", "short.md"]
    assert hits[0].cosine == pytest.approx(0.995 - PASSAGE_DISCOUNT, abs=1e-3)
    # mid.md's passage, less the discount (0.862), only just beats its own vector (0.857)
    assert hits[1].cosine == pytest.approx(0.912 - PASSAGE_DISCOUNT, abs=1e-3)
    assert note_score(0.857, [0.80]) == 0.857
