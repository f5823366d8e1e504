"""`vault-ko eval` end to end: two test collections, the real model, its own local graph."""

from __future__ import annotations

import itertools
import json
import math
import os
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.errors import EmbedderError
from pipeline.evaluate.harness import FIXED_THRESHOLDS

pytestmark = [pytest.mark.integration, pytest.mark.model]

EVAL_DATA = Path(__file__).resolve().parents[1] / "data" / "eval"
METRICS = {"ndcg@10", "recall@10", "recall@100", "mrr@10"}
LABELS = {"strong", "moderate", "weak", "no_match", "unscored"}


def _unit(value: object) -> bool:
    return isinstance(value, float) and 0.0 <= value <= 1.0


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, Path]:
    """One run of the command (model load + graph start are the slow part), shared.

    arcadedb-embedded is a dependency of the package, so a missing local graph fails here.
    """
    work = tmp_path_factory.mktemp("eval")
    report = work / "report.md"
    before = set(os.listdir(tempfile.gettempdir()))
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(EVAL_DATA / "gardening"),
            "--offtopic",
            str(EVAL_DATA / "astronomy"),
            "--json",
            "--out",
            str(report),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    leftovers = {
        n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("vault-ko-eval-")
    }
    assert leftovers == set(), "the temporary vault and graph were not removed"
    return json.loads(result.stdout), result.stderr, report


def test_eval_prints_every_field_of_the_json_contract(eval_run: tuple[dict, str, Path]) -> None:
    data, _, _ = eval_run
    assert data["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert data["docs"] == data["notes"] == 44
    assert data["queries"] == {
        "on_topic": 25,
        "off_topic": 25,
        "off_topic_by_collection": {"astronomy": 25},
    }
    cal = data["calibration"]
    assert cal["source"] == "vault"  # 44 notes, 946 pairs: a trusted calibration
    assert cal["measured"]["n_notes"] == 44
    assert cal["measured"]["n_pairs"] == 44 * 43 // 2
    assert 0.0 < cal["noise_floor"] < 1.0
    assert 0.0 < cal["sigma"] < 1.0
    assert isinstance(cal["tight"], bool)
    for mode in ("semantic", "fallback", "dense", "hybrid", "bm25_baseline", "bm25_whole_words"):
        assert set(data[mode]) == METRICS
        assert all(_unit(v) for v in data[mode].values())
    assert data["language"] == "english"
    answers = data["answers"]
    assert answers["questions"] == 25 and answers["answer_grade"] == 1
    for mode in ("semantic", "fallback", "dense", "hybrid"):
        assert {"subject_ndcg@10", "subject_p@5", "top3_answer", "note_ndcg@10"} <= set(
            answers[mode]
        )
    for group in ("on_topic", "off_topic"):
        assert set(data["labels"][group]) == LABELS
        assert sum(data["labels"][group].values()) == 25
    bands = data["bands"]
    assert set(bands) == {"strong", "moderate", "weak", "no_match"}
    for band, row in bands.items():
        assert row["n"] == data["labels"]["on_topic"][band]
        assert row["offtopic_n"] == data["labels"]["off_topic"][band]
        assert row["top3_answering"] is None  # a collection judges documents
        for key in ("precision_relevant", "precision_answering"):
            assert (row[key] is None) == (row["n"] == 0) and (row[key] is None or _unit(row[key]))
    for key in ("false_silence", "offtopic_silence", "offtopic_confident", "auc_z", "auc_cosine"):
        assert _unit(data[key]), key
    assert [row["threshold"] for row in data["fixed_thresholds"]] == [
        t for _, t in FIXED_THRESHOLDS
    ]
    for row in data["fixed_thresholds"]:
        assert isinstance(row["policy"], str)
        assert _unit(row["false_silence"]) and _unit(row["offtopic_silence"])


def test_eval_figures_are_consistent(eval_run: tuple[dict, str, Path]) -> None:
    data, _, _ = eval_run
    semantic, fallback = data["semantic"], data["fallback"]
    assert semantic == data[data["default_retrieval"]] and data["default_retrieval"] == "hybrid"
    # Meaning beats words on these short paraphrased documents; the full text still finds
    # most of them, as well as a plain BM25 library does.
    assert semantic["ndcg@10"] > fallback["ndcg@10"]
    assert fallback["ndcg@10"] >= 0.95 * data["bm25_baseline"]["ndcg@10"]
    best = data["recommended_retrieval"]
    assert data[best]["ndcg@10"] == max(data[m]["ndcg@10"] for m in ("dense", "hybrid"))
    # Stemmed words reach more of these notes than whole words ("pruning" meets "prune").
    assert data["bm25_baseline"]["ndcg@10"] > data["bm25_whole_words"]["ndcg@10"]
    assert fallback["recall@10"] > 0.5
    for mode in ("semantic", "fallback", "hybrid", "bm25_baseline"):
        assert data[mode]["recall@100"] >= data[mode]["recall@10"]
    labels = data["labels"]
    assert data["false_silence"] == pytest.approx(labels["on_topic"]["no_match"] / 25)
    assert data["offtopic_silence"] == pytest.approx(labels["off_topic"]["no_match"] / 25)
    confident = labels["off_topic"]["moderate"] + labels["off_topic"]["strong"]
    assert data["offtopic_confident"] == pytest.approx(confident / 25)
    # A higher fixed threshold silences at least as much of either kind.
    rows = data["fixed_thresholds"]
    for low, high in itertools.pairwise(rows):
        assert high["false_silence"] >= low["false_silence"]
        assert high["offtopic_silence"] >= low["offtopic_silence"]
    assert math.isclose(data["auc_z"], data["auc_cosine"])  # one calibration: z is monotone
    assert data["auc_cosine"] > 0.5  # on-topic questions reach closer notes than off-topic


def test_eval_reports_progress_on_stderr_and_writes_the_markdown(
    eval_run: tuple[dict, str, Path],
) -> None:
    _, stderr, report = eval_run
    assert "local graph stopped" in stderr
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# vault-ko eval: gardening")
    # The three retrieval columns (and the yardstick), each a row of the retrieval table.
    for row in (
        "| dense (graph vectors) |",
        "| hybrid (vectors + full text, fused scores) ← default |",
    ):
        assert row in text
    assert "| fallback (full text only) |" in text and "| plain BM25 (bm25s)" in text
    assert "| plain BM25, whole words (no stemming) |" in text
    assert "The full text is stemmed as english" in text
    # The fusion by scores keeps the vectors' order on these paraphrases and adds the words
    # (gardening: hybrid 0.903, dense 0.871): no advice to switch.
    assert "The default retrieval (hybrid) is the better one here." in text
    assert "| fallback | 25 |" in text  # the answers table
    assert "## Calibration used" in text


def test_eval_rejects_a_bad_collection_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "docs.jsonl").write_text('{"id": "d1", "text": "x"}\n{oops\n', encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text('{"id": "q1", "text": "x"}\n', encoding="utf-8")
    (tmp_path / "qrels.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["eval", str(tmp_path), "--json"])
    assert result.exit_code != 0
    assert f"{tmp_path / 'docs.jsonl'}:2: invalid JSON" in str(result.exception)


def test_eval_removes_its_temporary_vault_when_the_model_cannot_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(work))  # where mkdtemp puts the vault
    result = CliRunner().invoke(
        cli, ["eval", str(EVAL_DATA / "astronomy"), "--model", "no-such-org/no-such-model"]
    )
    assert isinstance(result.exception, EmbedderError)
    assert "wrote 43 notes" in result.stderr  # the vault existed before the model failed
    # torch, imported here for the first time in this process when the earlier evals used
    # the prepared model, makes its compile cache under the temp dir: not eval's to remove.
    assert [p.name for p in work.iterdir() if not p.name.startswith("torchinductor_")] == []


def test_fit_bands_leaves_each_collection_out_and_reports_it(tmp_path: Path) -> None:
    mundane = Path(__file__).resolve().parents[1] / "data" / "offtopic" / "mundane"
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--fit-bands",
            "--collection",
            str(EVAL_DATA / "gardening"),
            "--collection",
            str(EVAL_DATA / "astronomy"),
            "--offtopic",
            str(mundane),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["collections"] == ["gardening", "astronomy"]
    assert [f["held_out"] for f in data["leave_one_out"]] == ["gardening", "astronomy"]
    for fold in data["leave_one_out"]:
        assert sum(fold["bands"][b]["n"] for b in fold["bands"]) == 25  # every question
        assert sum(fold["bands"][b]["offtopic_n"] for b in fold["bands"]) == 30
    pooled = data["held_out_pooled"]
    assert sum(row["n"] for row in pooled.values()) == 50
    assert set(data["false_silence"]) == {"gardening", "astronomy"}
    assert isinstance(data["meets_targets"], bool)
    strong = data["seed_meaning"]["strong"]  # both collections have strong answers
    assert strong["collections"] == 2 and 0 < strong["value"] <= 1
    assert strong["n"] == data["seed_pooled"]["strong"]["n"]
    assert "eval: gardening: evaluating" in result.stderr
