"""The eval harness without servers: the notes it writes, degraded-mode reach, the report."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.app import App
from pipeline.calibrate import Basis, assess
from pipeline.config import load_settings
from pipeline.evaluate.beir import Collection, Doc, Query
from pipeline.evaluate.harness import (
    CalibrationUsed,
    EvalReport,
    QueryOutcome,
    _calibration_used,
    build_vault,
    doc_subjects,
    eval_settings,
    note_paths,
    safe_id,
)
from pipeline.evaluate.report import to_markdown
from pipeline.ingest import ingest_vault
from pipeline.kodb import KoDB
from pipeline.model import Answer
from pipeline.query import QueryOptions
from pipeline.vault.extract import extract_facts
from pipeline.vault.parse import read_note


def _collection(docs: list[Doc]) -> Collection:
    return Collection(
        "tiny",
        Path("."),
        {d.id: d for d in docs},
        {"q1": Query("q1", "pruning roses")},
        {"q1": {docs[0].id: 1}},
    )


def test_safe_ids_are_lower_case_file_names_and_collisions_get_suffixes() -> None:
    assert safe_id("Doc 12/ä:b") == "doc-12-b"
    assert safe_id("../..") == "doc"
    paths = note_paths({k: Doc(k, "t", "x") for k in ("A", "a", "a-2", "?")})
    assert paths == {
        "A": "wiki/a.md",
        "a": "wiki/a-2.md",
        "a-2": "wiki/a-2-2.md",
        "?": "wiki/doc.md",
    }


def test_each_doc_becomes_a_wiki_note_titled_and_subjected_by_its_title(tmp_path: Path) -> None:
    docs = [
        Doc("g1", 'Pruning "old" roses: a guide', "Cut above an outward bud.\n# Not a title"),
        Doc("g2", "", "A document without a title."),
    ]
    mapping = build_vault(_collection(docs), tmp_path)
    assert mapping == {"wiki/g1.md": "g1", "wiki/g2.md": "g2"}
    note = read_note(tmp_path, "wiki/g1.md", "wiki", 1_000_000)
    assert note.title == 'Pruning "old" roses: a guide'
    assert note.subject == note.title
    assert "Cut above an outward bud." in note.embed_text
    facts = extract_facts(note)
    title = 'Pruning "old" roses: a guide'
    assert {(f.subject, f.predicate, f.object, f.source_file) for f in facts} == {
        (title, "doc_id", "g1", "wiki/g1.md"),
        (title, "title", title, "wiki/g1.md"),
        (title, "summary", "Cut above an outward bud.", "wiki/g1.md"),
        (title, "section", "Not a title", "wiki/g1.md"),
    }
    untitled = read_note(tmp_path, "wiki/g2.md", "wiki", 1_000_000)
    assert untitled.title == "g2"  # a note needs a name to be a subject


def test_documents_sharing_a_title_are_subjects_of_their_own(tmp_path: Path) -> None:
    docs = [Doc("d1", "Roses", "Red."), Doc("d2", "roses", "Pink."), Doc("d3", "Tulips", "x")]
    assert doc_subjects({d.id: d for d in docs}) == {
        "d1": "Roses [d1]",
        "d2": "roses [d2]",
        "d3": "Tulips",
    }
    build_vault(_collection(docs), tmp_path)
    note = read_note(tmp_path, "wiki/d2.md", "wiki", 1_000_000)
    assert (note.title, note.subject) == ("roses", "roses [d2]")


def test_eval_settings_never_use_the_users_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_KO_KODB_URL", "postgresql+psycopg://someone@db/prod")
    monkeypatch.setenv("VAULT_KO_GRAPH_URL", "bolt://prod:7687")
    monkeypatch.setenv("VAULT_KO_EMBED_BATCH_SIZE", "7")
    s = eval_settings(tmp_path, tmp_path / "state", {"embed_model": "some-model"})
    assert s.kodb_url is None
    assert s.effective_kodb_url == f"sqlite:///{tmp_path / 'state' / 'ko.db'}"
    assert s.graph_url is None
    assert s.embed_model == "some-model"
    assert s.embed_batch_size == 7


def test_degraded_mode_reaches_docs_through_their_words(tmp_path: Path) -> None:
    docs = [
        Doc("d1", "Pruning roses", "Cut in late winter."),
        Doc("d2", "Black spot on roses", "A fungus of roses."),
        Doc("d3", "Sowing carrots", "Sow thinly in rows."),
        Doc("d4", "Pruning apple trees", "Winter and summer pruning."),
    ]
    vault = tmp_path / "vault"
    path_to_doc = build_vault(_collection(docs), vault)
    settings = load_settings(vault).replace(state_dir=tmp_path / "state")
    with KoDB.open(settings.effective_kodb_url) as kodb:
        ingest_vault(settings, kodb)
        with App(settings, kodb=kodb).pipeline() as p:
            opts = QueryOptions.from_settings(settings, semantic=False)
            answer = p.ask("when to cut roses in winter", opts)
            reached = [path_to_doc[h.path] for h in answer.hits]
            assert answer.mode == "fallback"
            # The body's words count too ("cut", "winter"), the title's words more.
            assert reached[0] == "d1"
            assert set(reached) == {"d1", "d2", "d4"}
            assert all(h.cosine is None and h.bm25 and h.bm25 > 0 for h in answer.hits)
            # Stemmed as English (the default): "carrot" meets "carrots", "sowed" "sow".
            found = p.ask("sowed a carrot", opts).hits
            assert [path_to_doc[h.path] for h in found] == ["d3"]
            p._kodb = None  # the test owns the KoDB; keep Pipeline.close from closing it


def test_with_language_none_degraded_mode_matches_whole_words_only(tmp_path: Path) -> None:
    docs = [Doc("d1", "Sowing carrots", "Sow thinly in rows."), Doc("d2", "Roses", "Prune.")]
    vault = tmp_path / "vault"
    path_to_doc = build_vault(_collection(docs), vault)
    settings = load_settings(vault, overrides={"vault_language": "none"}).replace(
        state_dir=tmp_path / "state"
    )
    with KoDB.open(settings.effective_kodb_url) as kodb:
        ingest_vault(settings, kodb)
        with App(settings, kodb=kodb).pipeline() as p:
            opts = QueryOptions.from_settings(settings, semantic=False)
            assert p.ask("carrot seedlings", opts).hits == ()  # "carrot" is not "carrots"
            assert [path_to_doc[h.path] for h in p.ask("carrots", opts).hits] == ["d1"]
            p._kodb = None


def _report(outcomes: list[QueryOutcome]) -> EvalReport:
    cal = CalibrationUsed("vault", 0.3, 0.1, 0.2, False, 0.3, 0.42, 0.0, None)
    return EvalReport(
        collection="tiny",
        offtopic=("other",),
        model="m",
        dims=3,
        docs=3,
        notes=3,
        calibration=cal,
        outcomes=tuple(outcomes),
        qrels={"q1": {"a": 2, "b": 1}, "q2": {"c": 1}},
        default_retrieval="dense",  # the outcomes below hold dense rankings
    )


def test_report_rates_labels_and_fixed_thresholds_from_outcomes() -> None:
    report = _report(
        [
            QueryOutcome(
                "q1", "on_topic", "strong", 0.7, 4.0, {"dense": ("a", "b"), "fallback": ("b",)}
            ),
            QueryOutcome(
                "q2", "on_topic", "no_match", 0.15, -1.5, {"dense": ("a", "c"), "fallback": ()}
            ),
            QueryOutcome("o1", "other", "no_match", 0.05, -2.5),
            QueryOutcome("o2", "other", "weak", 0.35, 0.5),
            QueryOutcome("o3", "other", "moderate", 0.5, 2.0),
            QueryOutcome("o4", "other", "no_match", 0.15, -1.5),
        ]
    )
    data = report.to_dict()
    assert data["semantic"]["recall@10"] == pytest.approx(1.0)
    assert data["semantic"]["mrr@10"] == pytest.approx((1 + 1 / 2) / 2)
    assert data["fallback"]["recall@10"] == pytest.approx((1 / 2 + 0) / 2)
    assert data["labels"]["on_topic"] == {
        "strong": 1,
        "moderate": 0,
        "weak": 0,
        "no_match": 1,
        "unscored": 0,
    }
    assert data["labels"]["off_topic"]["no_match"] == 2
    assert data["false_silence"] == pytest.approx(0.5)
    assert data["offtopic_silence"] == pytest.approx(0.5)
    assert data["offtopic_confident"] == pytest.approx(0.25)
    # on: 0.7, 0.15; off: 0.05, 0.35, 0.5, 0.15 → wins 0.7: 4; 0.15: 1 + ½ tie → 5.5 / 8.
    assert data["auc_cosine"] == pytest.approx(5.5 / 8)
    assert data["auc_z"] == pytest.approx(5.5 / 8)
    by_threshold = {row["threshold"]: row for row in data["fixed_thresholds"]}
    assert by_threshold[0.1]["false_silence"] == 0.0
    assert by_threshold[0.1]["offtopic_silence"] == pytest.approx(0.25)
    assert by_threshold[0.2]["false_silence"] == pytest.approx(0.5)
    assert by_threshold[0.2]["offtopic_silence"] == pytest.approx(0.5)
    assert by_threshold[0.55]["false_silence"] == pytest.approx(0.5)
    assert by_threshold[0.55]["offtopic_silence"] == 1.0
    assert "Graphiti" in by_threshold[0.2]["policy"]


def test_bands_say_how_often_each_bands_top_note_is_relevant_and_answering() -> None:
    """q1's strong answer leads with its grade-2 note (relevant, answering); q2's strong one
    with an unjudged note; q3's weak one with a grade-1 note of a question whose best is
    grade 2 (relevant, not answering). Off-topic answers count in their band."""
    report = _report(
        [
            QueryOutcome("q1", "on_topic", "strong", 0.7, 4.0, {"dense": ("a", "b")}),
            QueryOutcome("q2", "on_topic", "strong", 0.6, 3.0, {"dense": ("x", "c")}),
            QueryOutcome("q3", "on_topic", "weak", 0.4, 0.5, {"dense": ("b", "a")}),
            QueryOutcome("o1", "other", "strong", 0.6, 3.0),
            QueryOutcome("o2", "other", "no_match", 0.1, -2.0),
        ]
    )
    report = replace(report, qrels={**report.qrels, "q3": {"a": 2, "b": 1}})
    bands = report.to_dict()["bands"]
    assert bands["strong"] == {
        "n": 2,
        "precision_relevant": 0.5,
        "precision_answering": 0.5,
        "top3_answering": None,  # a collection judges documents, not answers' subjects
        "offtopic_n": 1,
    }
    assert bands["weak"]["precision_relevant"] == 1.0
    assert bands["weak"]["precision_answering"] == 0.0
    assert bands["moderate"] == {
        "n": 0,
        "precision_relevant": None,
        "precision_answering": None,
        "top3_answering": None,
        "offtopic_n": 0,
    }
    assert bands["no_match"]["offtopic_n"] == 1
    assert "| strong | 2 | 50.0% | 50.0% | – | 1 |" in to_markdown(report)


def test_bands_on_a_judged_vault_count_an_answering_subject_in_the_top_three() -> None:
    report = replace(
        _report(
            [
                QueryOutcome(
                    "q1",
                    "on_topic",
                    "moderate",
                    0.5,
                    2.0,
                    {"dense": ("b",)},
                    {"dense": ("z", "y", "a")},
                ),
                QueryOutcome(
                    "q2",
                    "on_topic",
                    "moderate",
                    0.5,
                    2.0,
                    {"dense": ("c",)},
                    {"dense": ("y", "z", "w", "c")},
                ),
            ]
        ),
        kind="vault",
        answer_grade=2,
        subject_qrels={"q1": {"a": 2}, "q2": {"c": 2}},
    )
    moderate = report.to_dict()["bands"]["moderate"]
    assert moderate["top3_answering"] == 0.5  # q2's answering subject is 4th
    assert moderate["precision_relevant"] == 1.0


def test_markdown_report_has_the_tables_and_the_calibration() -> None:
    report = _report(
        [QueryOutcome("q1", "on_topic", "weak", 0.4, 1.0, {"dense": ("a",), "fallback": ()})]
    )
    text = to_markdown(report)
    # nDCG@10 = 2 / (2 + 1/log2(3)) = 0.760: grade 2 at rank 1, grade 1 never retrieved.
    assert "| dense (graph vectors) ← default | 0.760 | 0.500 | 0.500 | 1.000 |" in text
    assert "| on-topic | 0 | 0 | 1 | 0 | 0 |" in text
    assert "| vault | 0.300 | 0.100 | 0.200 | no | 0.300 |" in text
    assert "Basic Memory" in text
    assert report.to_dict()["offtopic_silence"] is None  # no off-topic query was run


@pytest.mark.parametrize("default_n", [None, 0.05, 0.9])
def test_reported_floor_is_the_one_the_labels_are_cut_at(default_n: float | None) -> None:
    basis = Basis("vault", 0.30, 0.05, 0.2, default_n, 1.5, None)
    used = _calibration_used(basis, None)
    assert used.floor_cosine == assess(0.5, basis).floor_cosine
    assert assess(used.floor_cosine, basis).label == "no_match"
    assert assess(used.floor_cosine + 1e-6, basis).label != "no_match"


def test_reported_floor_is_empty_without_a_calibration() -> None:
    basis = Basis("none", None, None, 0.0, None, 1.5, "no calibration")
    assert _calibration_used(basis, None).floor_cosine is None


def test_an_evaluation_whose_semantic_answers_were_degraded_refuses_to_report() -> None:
    """Issue 35, item 15: under load every dense and hybrid answer came back degraded and
    the report printed fallback figures as semantic ones, with no warning."""
    from pipeline.errors import EvalDegraded
    from pipeline.evaluate.harness import _refuse_degraded
    from pipeline.model import Relevance

    def answer(mode: str) -> Answer:
        reason = "graph unavailable: circuit open" if mode == "fallback" else None
        rel = Relevance.unmeasured("unscored", "x")
        return Answer("q", mode, reason, rel, (), ())  # type: ignore[arg-type]

    fine = {"dense": {"semantic": 4, "fallback": 0}, "fallback": {"semantic": 0, "fallback": 4}}
    _refuse_degraded(fine, [answer("semantic")] * 4)  # fallback mode's own answers are fine
    lost = {**fine, "hybrid": {"semantic": 1, "fallback": 3}}
    with pytest.raises(EvalDegraded, match="3 of 4 hybrid answers were degraded") as info:
        _refuse_degraded(lost, [answer("fallback")] * 3)
    assert "circuit open" in str(info.value)


def test_the_report_counts_every_answer_by_mode() -> None:
    by_mode = {"dense": {"semantic": 2, "fallback": 0}, "fallback": {"semantic": 0, "fallback": 2}}
    report = replace(_report([]), answers_by_mode=by_mode)
    assert report.to_dict()["answers_by_mode"] == by_mode


def test_a_judged_subject_the_vault_lacks_is_a_warning_in_subject_order() -> None:
    from pipeline.evaluate.harness import _Mapper, _unknown_subject_warnings

    def mapper(known: set[str] | None) -> _Mapper:
        return _Mapper(
            note=lambda p: None,
            subject=lambda s: s,
            note_qrels={},
            subject_qrels={"q1": {"redis": 2, "zebra": 1}, "q2": {"alpha": 1, "redis": 1}},
            known=known,
            names={"zebra": "Zebra"},
        )

    assert _unknown_subject_warnings(mapper(None)) == []  # a BEIR run: any id may be judged
    assert _unknown_subject_warnings(mapper({"redis"})) == [
        "judged subject 'alpha' is not a subject of this vault; it can never be ranked",
        "judged subject 'Zebra' is not a subject of this vault; it can never be ranked",
    ]


def test_a_judgement_may_name_a_note_by_its_path_and_counts_as_its_subject() -> None:
    from pipeline.evaluate.harness import grades_by_subject

    by_path = {"meetings/2017-02-09.md": "node.js foundation tsc meeting 2017-02-09"}
    got = grades_by_subject(
        {"meetings/2017-02-09.md": 2, "redis": 1, "meetings/gone.md": 1}, by_path
    )
    assert got == {
        "node.js foundation tsc meeting 2017-02-09": 2,
        "redis": 1,
        "meetings/gone.md": 1,  # no such note: kept, so the eval warns that it never ranks
    }
    # A note named twice, by path and by subject, keeps its better grade.
    both = {"meetings/2017-02-09.md": 1, "node.js foundation tsc meeting 2017-02-09": 2}
    assert grades_by_subject(both, by_path) == {"node.js foundation tsc meeting 2017-02-09": 2}
