"""The orchestrator's stage order with fake stores: semantic, silence, fallback, presets."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pipeline.config import load_settings
from pipeline.errors import GraphQueryError, GraphUnavailable
from pipeline.graph.cypher import CypherLoadError
from pipeline.kodb.match import reference_search
from pipeline.model import Calibration, Fact
from pipeline.query import Pipeline, QueryOptions
from pipeline.rank import score_of

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class FakeHit:
    path: str
    title: str
    source_type: str
    cosine: float


class FakeGraph:
    def __init__(self, hits: list[FakeHit], down: bool = False) -> None:
        self.hits = hits
        self.down = down
        self.searches = 0

    def ping(self) -> None:
        if self.down:
            raise GraphUnavailable("connection refused")

    def vector_search(self, vector: np.ndarray, k: int) -> list[FakeHit]:
        self.searches += 1
        return self.hits[:k]

    def close(self) -> None:
        pass


class FakeEmbedder:
    model_id = MODEL
    dims = 4

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return np.ones((len(texts), 4), dtype=np.float32) / 2


class FakeKodb:
    def __init__(self, facts: list[Fact], cal: Calibration | None) -> None:
        self.facts = facts
        self.cal = cal

    def subjects_by_source_file(self, paths: Iterable[str]) -> dict[str, set[str]]:
        return {p: {f.subject_norm for f in self.facts if f.source_file == p} for p in paths}

    def search_subjects_many(self, terms: Sequence[str]) -> dict[str, list[str]]:
        norms = {f.subject_norm for f in self.facts}
        return {t: reference_search(t, norms) for t in terms}

    def facts_for_subjects(self, subject_norms: Iterable[str]) -> list[Fact]:
        wanted = set(subject_norms)
        return [f for f in self.facts if f.subject_norm in wanted]

    def latest_calibration(self, embedder: str | None = None, dims: int | None = None):
        return self.cal

    def close(self) -> None:
        pass


def F(subject: str, file: str, stype: str, pred: str = "mentioned_in", conf: float = 0.8) -> Fact:
    return Fact(subject, pred, file, conf, stype, file)  # type: ignore[arg-type]


FACTS = [
    F("Redis", "wiki/redis.md", "wiki", "tagged", 0.9),
    F("Redis", "adr/0007-use-redis.md", "adr", conf=0.95),
    F("Redis", "sessions/s1.md", "session"),
    F("Warm cache", "wiki/warm-cache.md", "wiki"),
    F("Warm cache", "sessions/s1.md", "session"),
    F("Warmstart", "sessions/s2.md", "session"),
]
CAL = Calibration(MODEL, 4, 2, 0.30, 0.10, 0.2, 60, 1770, 60, time.time())


def make(tmp_path: Path, hits: list[FakeHit], *, down: bool = False, cal=CAL):
    settings = load_settings(tmp_path, env={})
    graph, emb, kodb = FakeGraph(hits, down), FakeEmbedder(), FakeKodb(FACTS, cal)
    return Pipeline(settings, kodb=kodb, graph=graph, embedder=emb), graph, emb  # type: ignore[arg-type]


HITS = [
    FakeHit("adr/0007-use-redis.md", "Use Redis as the warm cache", "adr", 0.62),
    FakeHit("wiki/redis.md", "Redis", "wiki", 0.55),
    FakeHit("sessions/s2.md", "Warmstart scripts", "session", 0.20),
]


def test_semantic_answer_ranks_bridged_subjects_on_all_their_facts(tmp_path: Path) -> None:
    p, _graph, emb = make(tmp_path, HITS)
    a = p.ask("why did we pick redis for the warm cache")
    assert a.mode == "semantic"
    assert a.relevance.label == "strong"  # z = (0.62 - 0.30) / 0.10 = 3.2
    names = [s.subject for s in a.subjects]
    assert names[0] == "Redis"
    redis = a.subjects[0]
    assert redis.source_count == 3  # all its facts, not only the hit files
    assert redis.best_cosine == pytest.approx(0.62)
    assert redis.score == score_of(redis.source_count, redis.per_type, redis.total_facts)
    assert "Warmstart" not in names  # its only note is below the floor (0.30)
    assert emb.calls == 1


def test_no_match_is_silence(tmp_path: Path) -> None:
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.25)])
    a = p.ask("recipe for banana bread with walnuts")
    assert a.relevance.label == "no_match"
    assert a.subjects == ()
    assert a.mode == "semantic"


def test_fallback_when_graph_down_never_loads_the_model(tmp_path: Path) -> None:
    p, graph, emb = make(tmp_path, HITS, down=True)
    a = p.ask("what about the warm cache?")
    assert a.mode == "fallback"
    assert "graph unavailable" in (a.degraded_reason or "")
    assert a.relevance.label == "unscored"
    assert [s.subject for s in a.subjects] == ["Warm cache"]  # not Warmstart
    assert emb.calls == 0 and graph.searches == 0
    assert (tmp_path / ".vault-ko" / "fallback.log").read_text().count("\n") == 1


@pytest.mark.parametrize(
    "error",
    [
        CypherLoadError("missing Cypher file pipeline/cypher_files/neo4j/ping.cypher"),
        GraphQueryError("the graph at bolt://x runs Memgraph 2.21.1; vault-ko needs 3.0"),
    ],
    ids=["missing-cypher", "query-error"],
)
def test_a_graph_error_that_is_not_an_outage_still_answers_in_fallback(
    tmp_path: Path, error: GraphQueryError
) -> None:
    p, graph, emb = make(tmp_path, HITS)

    def broken_ping() -> None:
        raise error

    graph.ping = broken_ping  # type: ignore[method-assign]
    a = p.ask("what about the warm cache?")
    assert a.mode == "fallback"
    assert a.degraded_reason == f"graph error: {error}"
    assert [s.subject for s in a.subjects] == ["Warm cache"]
    assert emb.calls == 0


def test_a_graph_error_after_the_embedding_still_answers_in_fallback(tmp_path: Path) -> None:
    p, graph, _emb = make(tmp_path, HITS)

    def refuse(vector: np.ndarray, k: int) -> list[FakeHit]:
        raise GraphQueryError("the query vector has 4 dimensions but the index has 384")

    graph.vector_search = refuse  # type: ignore[method-assign]
    a = p.ask("what about the warm cache?")
    assert a.mode == "fallback" and "has 384" in (a.degraded_reason or "")
    assert a.relevance.label == "unscored"


def test_no_semantic_flag_answers_by_words(tmp_path: Path) -> None:
    p, _graph, emb = make(tmp_path, HITS)
    a = p.ask("warmstart", QueryOptions(semantic=False))
    assert a.mode == "fallback"
    assert [s.subject for s in a.subjects] == ["Warmstart"]
    assert emb.calls == 0


def test_uncalibrated_unknown_model_warns_and_never_silences(tmp_path: Path) -> None:
    p, _, emb = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.05)], cal=None)
    emb.model_id = "someone/unknown-model"
    a = p.ask("anything")
    assert a.relevance.label == "unscored"
    assert a.relevance.calibration == "none"
    assert "no_match is disabled" in (a.relevance.warning or "")
    assert a.subjects  # not silenced


def test_untrusted_calibration_uses_embedder_defaults(tmp_path: Path) -> None:
    small = Calibration(MODEL, 4, 2, 0.05, 0.10, 0.2, 12, 66, 12, time.time())
    p, _, _ = make(tmp_path, [FakeHit("wiki/redis.md", "Redis", "wiki", 0.30)], cal=small)
    a = p.ask("redis")
    assert a.relevance.calibration == "embedder-default"
    assert a.relevance.floor_cosine == pytest.approx(0.42)
    assert a.relevance.label == "no_match"


@pytest.mark.parametrize(
    ("preset", "check"),
    [
        ("routing", lambda a: len(a.hits) == 3 and a.subjects == ()),
        ("episodic", lambda a: [h.source_type for h in a.hits] == ["session"]),
        ("crystallize", lambda a: all(s.crystal_ready for s in a.subjects)),
        ("wiki-gap", lambda a: "Warmstart" in [s.subject for s in a.subjects]),
    ],
)
def test_presets(tmp_path: Path, preset: str, check) -> None:
    p, _, _ = make(tmp_path, HITS)
    opts = QueryOptions.from_settings(p.settings, preset=preset)
    assert check(p.ask("redis warm cache warmstart", opts))


class DialectGraph(FakeGraph):
    """Serves candidates the way one backend reports them, through the real re-scoring."""

    def __init__(self, dialect: str, with_embeddings: bool) -> None:
        super().__init__([])
        self.dialect = dialect
        self.with_embeddings = with_embeddings

    def vector_search(self, vector: np.ndarray, k: int) -> list:
        from pipeline.graph.backends import score_scale
        from pipeline.graph.records import Candidate
        from pipeline.graph.scoring import exact_rescore

        q = np.asarray(vector, dtype=np.float64)
        q = q / np.linalg.norm(q)
        basis = np.linalg.svd(q[None, :])[2]  # q and vectors orthogonal to it
        cands = []
        for i, (path, cos) in enumerate(
            [("adr/0007-use-redis.md", 0.62), ("wiki/redis.md", 0.41), ("sessions/s2.md", -0.12)]
        ):
            emb = cos * q + np.sqrt(1 - cos**2) * basis[i + 1]
            cands.append(
                Candidate(
                    path,
                    path,
                    path.split("/")[0].rstrip("s"),
                    tuple(emb) if self.with_embeddings else None,
                    score_scale(self.dialect).from_cosine(cos),
                )
            )
        return exact_rescore(q, cands, k, score_scale(self.dialect))


@pytest.mark.parametrize("with_embeddings", [True, False])
def test_labels_identical_whichever_backend_score_scale(
    tmp_path: Path, with_embeddings: bool
) -> None:
    answers = {}
    for dialect in ("memgraph", "neo4j", "arcadedb"):
        settings = load_settings(tmp_path, env={})
        graph = DialectGraph(dialect, with_embeddings)
        p = Pipeline(settings, kodb=FakeKodb(FACTS, CAL), graph=graph, embedder=FakeEmbedder())  # type: ignore[arg-type]
        a = p.ask("redis warm cache")
        answers[dialect] = (
            a.relevance.label,
            round(a.relevance.top_cosine or 0, 9),
            [(h.path, round(h.cosine, 9)) for h in a.hits],
            [s.subject for s in a.subjects],
        )
    assert answers["memgraph"] == answers["neo4j"] == answers["arcadedb"]
    assert answers["neo4j"][0] == "strong"
    assert answers["neo4j"][1] == pytest.approx(0.62)
