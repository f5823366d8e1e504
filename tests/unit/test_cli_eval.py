"""`vault-ko eval`'s command line: argument checks and routing, with the harness replaced."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

import pipeline.evaluate as evaluate
from pipeline.cli import cli
from pipeline.errors import InputError
from pipeline.evaluate.harness import CalibrationUsed, EvalReport, QueryOutcome

JUDGED = [
    {"question": "how is the cache warmed?", "relevant": {"Warm cache": 2}, "split": "tune"},
    {"question": "what limits the rate?", "relevant": {"Rate limiting": 2}, "split": "test"},
]


def _report(warnings: tuple[str, ...] = ()) -> EvalReport:
    cal = CalibrationUsed("vault", 0.3, 0.1, 0.2, False, 0.3, 0.42, 0.0, None)
    return EvalReport(
        collection="tiny",
        offtopic=(),
        model="m",
        dims=3,
        docs=3,
        notes=3,
        calibration=cal,
        outcomes=(QueryOutcome("q1", "on_topic", "weak", 0.4, 1.0, {"dense": ("a",)}),),
        qrels={"q1": {"a": 2}},
        warnings=warnings,
        default_retrieval="dense",  # the outcome holds a dense ranking
    )


@pytest.fixture
def judged(tmp_path: Path) -> Path:
    path = tmp_path / "judged.jsonl"
    path.write_text("".join(json.dumps(j) + "\n" for j in JUDGED), encoding="utf-8")
    return path


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    seen: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def fake(name: str) -> Any:
        def run(*args: Any, **kw: Any) -> EvalReport:
            seen.append((name, args, kw))
            kw["progress"]("running")
            return _report(warnings=("judged subject 'x' is not a subject of this vault",))

        return run

    monkeypatch.setattr(evaluate, "run_eval", fake("run_eval"))
    monkeypatch.setattr(evaluate, "run_vault_eval", fake("run_vault_eval"))
    return seen


def test_split_without_judged_is_a_usage_error(tmp_path: Path, calls: list[Any]) -> None:
    result = CliRunner().invoke(cli, ["eval", str(tmp_path), "--split", "tune"])
    assert result.exit_code == 2
    assert "--split needs --judged" in result.output
    assert calls == []


def test_a_second_folder_without_offtopic_is_a_usage_error(
    tmp_path: Path, calls: list[Any]
) -> None:
    result = CliRunner().invoke(cli, ["eval", str(tmp_path), str(tmp_path / "other")])
    assert result.exit_code == 2
    assert "one collection at a time" in result.output
    assert calls == []


def test_a_split_with_no_judged_question_is_a_usage_error(
    tmp_path: Path, judged: Path, calls: list[Any]
) -> None:
    judged.write_text(json.dumps(JUDGED[0]) + "\n", encoding="utf-8")  # tune only
    args = ["eval", str(tmp_path), "--judged", str(judged), "--split", "test"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "has no question of split 'test'" in result.output
    assert calls == []


def test_a_missing_vault_folder_is_a_usage_error(
    tmp_path: Path, judged: Path, calls: list[Any]
) -> None:
    result = CliRunner().invoke(cli, ["eval", str(tmp_path / "nowhere"), "--judged", str(judged)])
    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert calls == []


def test_judged_runs_the_vault_eval_on_the_split_and_prints_its_warnings(
    tmp_path: Path, judged: Path, calls: list[Any]
) -> None:
    out = tmp_path / "report.md"
    args = ["eval", str(tmp_path), "--judged", str(judged), "--split", "test"]
    result = CliRunner().invoke(cli, [*args, "--model", "some-model", "--out", str(out)])
    assert result.exit_code == 0, result.output
    [(name, args_, kw)] = calls
    assert name == "run_vault_eval"
    assert args_[0] == tmp_path
    assert [q.question for q in args_[1]] == ["what limits the rate?"]
    assert kw["judged_file"] == "judged.jsonl"
    assert kw["overrides"] == {"embed_model": "some-model"}
    assert "eval: running" in result.stderr
    assert "warning: judged subject 'x'" in result.stderr
    assert "eval: report written to" in result.stderr  # rich may wrap the long path
    assert result.stdout == out.read_text(encoding="utf-8")
    assert result.stdout.startswith("# vault-ko eval: tiny")


def test_an_out_file_that_cannot_be_written_is_refused_before_the_eval_runs(
    tmp_path: Path, judged: Path, calls: list[Any]
) -> None:
    (tmp_path / "afile").write_text("x")
    args = ["eval", str(tmp_path), "--judged", str(judged)]
    for out, said in (
        (tmp_path / "missing" / "r.md", "is not a folder"),
        (tmp_path / "afile" / "r.md", "is not a folder"),
    ):
        result = CliRunner().invoke(cli, [*args, "--out", str(out)])
        assert result.exit_code == 2 and said in result.output, result.output
    assert calls == []


def test_a_report_that_cannot_be_written_at_the_end_was_printed_and_fails_in_one_line(
    tmp_path: Path, judged: Path, calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.md"

    def full(self: Path, *a: Any, **kw: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    result = CliRunner().invoke(
        cli, ["eval", str(tmp_path), "--judged", str(judged), "--out", str(out)]
    )
    assert result.stdout.startswith("# vault-ko eval: tiny")
    # The CLI's entry point prints a VaultKoError as one line with its exit code.
    assert isinstance(result.exception, InputError)
    assert str(result.exception).endswith(
        "r.md: cannot write the report: No space left on device (it was printed)"
    )


def test_a_collection_run_prints_json_and_not_the_report_s_warnings(
    tmp_path: Path, calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = SimpleNamespace(warnings=["1 judged query id(s) not in queries.jsonl"])
    monkeypatch.setattr(evaluate, "read_collection", lambda folder: collection)
    model = tmp_path / "model"
    model.mkdir()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["eval", str(tmp_path), "--model", "model", "--json"])
    assert result.exit_code == 0, result.output
    [(name, args_, kw)] = calls
    assert name == "run_eval"
    assert args_[0] is collection
    assert kw["overrides"] == {"embed_model": str(model.resolve())}
    assert "warning: 1 judged query id(s) not in queries.jsonl" in result.stderr
    assert "judged subject" not in result.stderr
    assert json.loads(result.stdout)["collection"] == "tiny"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--collection", "."], "--collection is for --fit-bands"),
        (["--fit-bands", "--collection", ".", "PATH"], "not PATH or --judged"),
        (["--fit-bands", "--collection", "."], "two --collection sets or more"),
        (["--fit-bands", "--collection", "nowhere"], "folder nowhere does not exist"),
        (["--fit-bands", "--collection", ".=missing.jsonl"], "judged file missing.jsonl"),
        ([], "PATH is required"),
    ],
)
def test_fit_bands_arguments_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "PATH").mkdir()
    result = CliRunner().invoke(cli, ["eval", *extra])
    assert result.exit_code == 2
    assert message in result.output


def test_fit_bands_evaluates_each_collection_and_fits_on_them(
    tmp_path: Path, judged: Path, calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluate, "read_collection", lambda folder: SimpleNamespace(warnings=[]))
    beir = tmp_path / "cranfield"
    beir.mkdir()
    args = ["eval", "--fit-bands", "--collection", str(beir)]
    result = CliRunner().invoke(
        cli, [*args, "--collection", f"{tmp_path}={judged}", "--json", "--per-query"]
    )
    assert result.exit_code == 0, result.output
    assert [name for name, _, _ in calls] == ["run_eval", "run_vault_eval"]
    data = json.loads(result.stdout)
    assert data["collections"] == ["cranfield", "judged"]
    assert data["model"] == ["m"]
    assert [(p["collection"], p["z"], p["relevant"]) for p in data["points"]] == [
        ("cranfield", 1.0, True),
        ("judged", 1.0, True),
    ]
    assert "warning: judged: judged subject 'x'" in result.stderr
    assert data["calibration"]["judged"]["mu"] == 0.2
    text = CliRunner().invoke(cli, [*args, "--collection", f"{tmp_path}={judged}"])
    assert "## Leave one collection out" in text.stdout
    assert "What each band means by the seed's cut-offs" in text.stdout
    assert "| judged | 0.300 | 0.100 | – | 0.200 | no | 0.300 |" in text.stdout


def test_an_out_file_that_eval_reads_is_refused_before_the_eval_runs(
    tmp_path: Path, judged: Path, calls: list[Any]
) -> None:
    note = tmp_path / "note.md"
    note.write_text("# A note\n")
    kept = judged.read_bytes()
    args = ["eval", str(tmp_path), "--judged", str(judged)]
    for out, said in (
        (judged, "is the --judged file"),
        (tmp_path / "." / judged.name, "is the --judged file"),  # another path to it
        (note, "is read by eval in"),
    ):
        result = CliRunner().invoke(cli, [*args, "--out", str(out)])
        assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    assert calls == [] and judged.read_bytes() == kept
    assert note.read_text() == "# A note\n"
    earlier = tmp_path / "report.txt"  # an earlier run's report is no input: written again
    earlier.write_text("old report")
    assert CliRunner().invoke(cli, [*args, "--out", str(earlier)]).exit_code == 0
