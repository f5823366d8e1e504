"""Private notes never reach an answer: not as hits, excerpts, facts or subjects."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from pipeline.app import App
from pipeline.config import load_settings
from pipeline.model import Fact, Note
from pipeline.privacy import PrivateNotes, PublicGraph, redact, redact_freshness
from pipeline.render import to_dict

PRIVATE = PrivateNotes(("private/**", "**/secret-*.md"))


@dataclass(frozen=True)
class Hit:
    path: str
    title: str
    source_type: str
    cosine: float


@dataclass(frozen=True)
class State:
    path: str


class Graph:
    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits
        self.asked: list[int] = []

    def ping(self) -> float:
        return 1.0

    def vector_search(self, vector: np.ndarray, k: int) -> list[Hit]:
        self.asked.append(k)
        return self.hits[:k]

    def all_vectors(self) -> tuple[list[State], np.ndarray]:
        return [State(h.path) for h in self.hits], np.eye(len(self.hits), dtype=np.float32)

    def note_states(self) -> dict[str, State]:
        return {h.path: State(h.path) for h in self.hits}

    def note_vector_sets(self, paths: list[str]) -> dict[str, tuple[tuple[float, ...], ...]]:
        known = {h.path for h in self.hits}
        return {p: ((1.0,), (0.5,)) for p in paths if p in known}

    def close(self) -> None:
        pass


class Model:
    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dims = 4

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32) / 2


def test_the_graph_view_writes_every_reader_method_and_none_returns_a_private_note() -> None:
    from pipeline.graph.reader import READER_METHODS

    assert "__getattr__" not in vars(PublicGraph)
    assert [m for m in READER_METHODS if m not in vars(PublicGraph)] == []
    hits = [Hit("private/a.md", "a", "wiki", 0.9), Hit("wiki/b.md", "b", "wiki", 0.8)]
    view = PublicGraph(Graph(hits), PRIVATE)
    calls = {
        "ping": lambda: view.ping(),
        "vector_search": lambda: view.vector_search(np.zeros(4), 5),
        "note_vector_sets": lambda: view.note_vector_sets(["private/a.md", "wiki/b.md"]),
        "all_vectors": lambda: view.all_vectors()[0],
        "note_states": lambda: view.note_states(),
        "close": lambda: view.close(),
    }
    assert set(calls) == set(READER_METHODS)
    shown = {m: call() for m, call in calls.items()}
    assert [m for m, value in shown.items() if "private/" in repr(value)] == []
    assert shown["note_vector_sets"] == {"wiki/b.md": ((1.0,), (0.5,))}


def test_globs_match_folders_and_names() -> None:
    assert PRIVATE.is_private("private/salary.md")
    assert PRIVATE.is_private("wiki/secret-plan.md")
    assert not PRIVATE.is_private("wiki/redis.md")
    assert not PrivateNotes()


def test_the_graph_view_over_fetches_until_k_public_notes() -> None:
    hits = [Hit(f"private/{i}.md", f"P{i}", "wiki", 0.9 - i / 100) for i in range(5)]
    hits += [Hit(f"wiki/{i}.md", f"W{i}", "wiki", 0.5 - i / 100) for i in range(5)]
    graph = Graph(hits)
    found = PublicGraph(graph, PRIVATE).vector_search(np.zeros(4), 3)
    assert [h.path for h in found] == ["wiki/0.md", "wiki/1.md", "wiki/2.md"]
    assert graph.asked == [6, 12]
    states, matrix = PublicGraph(graph, PRIVATE).all_vectors()
    assert [s.path for s in states] == [f"wiki/{i}.md" for i in range(5)]
    assert matrix.shape == (5, 10)


def private_vault(tmp_path: Path) -> tuple[App, Graph]:
    (tmp_path / "vault-ko.toml").write_text('[vault]\nprivate_globs = ["private/**"]\n')
    settings = load_settings(tmp_path, env={})
    graph = Graph(
        [
            Hit("private/salary-review.md", "Salary review with Zanzibar", "wiki", 0.9),
            Hit("wiki/redis.md", "Redis", "wiki", 0.6),
        ]
    )
    app = App(settings, graph=graph, embedder=Model())  # type: ignore[arg-type]
    notes = [
        Note(
            "private/salary-review.md",
            "Salary review with Zanzibar",
            "wiki",
            "h1",
            0,
            1,
            None,
            "Zanzibar pays for the raise",
        ),
        Note("wiki/redis.md", "Redis", "wiki", "h2", 0, 1, None, "An in-memory store"),
    ]
    secret = "private/salary-review.md"
    app.kodb.apply_ingest(
        [
            (
                notes[0],
                [
                    Fact(
                        "Salary review with Zanzibar",
                        "amount",
                        "Zanzibar 12%",
                        0.95,
                        "wiki",
                        secret,
                    ),
                    Fact(
                        "Redis", "mentioned_in", "Salary review with Zanzibar", 0.7, "wiki", secret
                    ),
                ],
            ),
            (notes[1], [Fact("Redis", "alias", "redis-server", 0.95, "wiki", "wiki/redis.md")]),
        ],
        [],
    )
    return app, graph


def test_a_private_note_never_appears_in_an_answer(tmp_path: Path) -> None:
    from pipeline.query import QueryOptions

    app, _ = private_vault(tmp_path)
    with app:
        for semantic in (True, False):
            answer = app.pipeline().ask(
                "zanzibar salary review redis", QueryOptions(semantic=semantic)
            )
            text = json.dumps(to_dict(answer))
            assert "Zanzibar" not in text and "salary-review" not in text, text
        shown = app.pipeline(include_private=True).ask("zanzibar salary review redis")
        assert "salary-review" in json.dumps(to_dict(shown))


def test_redact_drops_private_hits_facts_and_subjects_known_only_from_them() -> None:
    from pipeline.model import Answer, FactView, Relevance, SubjectRank
    from pipeline.model import Hit as ModelHit

    rel = Relevance("strong", 0.9, 3.0, 0.3, 0.1, 0.3, "vault", False)

    def subject(name: str, files: list[str]) -> SubjectRank:
        facts = tuple(FactView("p", "o", 0.9, "wiki", f) for f in files)
        return SubjectRank(name, 10, 1, {"wiki": 1}, 1, 1, 0.9, 0.9, False, {"p": 1}, facts)

    answer = Answer(
        "q",
        "semantic",
        None,
        rel,
        (ModelHit("private/a.md", "A", "wiki", 0.9), ModelHit("wiki/b.md", "B", "wiki", 0.8)),
        (subject("A", ["private/a.md"]), subject("B", ["private/a.md", "wiki/b.md"])),
    )
    matches = (
        ModelHit("private/a.md", "A", "wiki", None, bm25=2.0),
        ModelHit("wiki/b.md", "B", "wiki", None, bm25=1.0),
    )
    answer = replace(answer, word_matches=matches, word_match_count=7)
    out = redact(answer, PRIVATE)
    # The count held a private note: it goes with it, the public match stays.
    assert [h.path for h in out.word_matches] == ["wiki/b.md"] and out.word_match_count is None
    assert [h.path for h in out.hits] == ["wiki/b.md"]
    assert [s.subject for s in out.subjects] == ["B"]
    assert [f.source_file for f in out.subjects[0].facts] == ["wiki/b.md"]
    assert redact(answer, PrivateNotes()) is answer


def test_freshness_json_loses_private_paths_but_keeps_counts() -> None:
    report = {
        "counts": {"missing": 2},
        "notes": {"missing": ["private/a.md", "wiki/b.md"], "stale": []},
        "skipped": [{"path": "private/c.md", "reason": "bad"}],
        "kodb": {"orphan_fact_files": ["private/d.md"], "facts": 3},
    }
    out = redact_freshness(report, PRIVATE)
    assert out["notes"]["missing"] == ["wiki/b.md"]
    assert out["skipped"] == [] and out["kodb"]["orphan_fact_files"] == []
    assert out["counts"] == {"missing": 2} and out["kodb"]["facts"] == 3


def test_freshness_json_of_a_graph_down_check_keeps_its_unknown_lists_null() -> None:
    report = {"notes": {"missing": None, "stale": None}, "skipped": [], "kodb": {}}
    out = redact_freshness(report, PRIVATE)
    assert out["notes"] == {"missing": None, "stale": None}
