"""`vault-ko facts import|search` end to end on a SQLite KO-DB in a temp vault."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.cli.root import cli
from pipeline.cli.root import run as run_cli
from pipeline.errors import EXIT_INPUT, EXIT_USAGE
from pipeline.kodb import KoDB

FACTS = Path(__file__).resolve().parents[2] / "data" / "facts"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    return folder


def run(args: list[str]) -> int:
    """Run the CLI as `main()` does; return its exit code."""
    with pytest.raises(SystemExit) as info:
        run_cli(cli, args)
    return int(info.value.code or 0)


def kodb_count(vault: Path) -> int:
    with KoDB.open(f"sqlite:///{vault / '.vault-ko' / 'ko.db'}") as db:
        return db.count_facts()


def test_bad_row_names_its_line_exits_3_and_writes_nothing(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["--vault", str(vault), "facts", "import", str(FACTS / "good.jsonl")]) == 0
    before = kodb_count(vault)
    capsys.readouterr()
    code = run(["--vault", str(vault), "facts", "import", str(FACTS / "bad_line3.jsonl")])
    captured = capsys.readouterr()
    assert code == EXIT_INPUT
    assert f"{FACTS / 'bad_line3.jsonl'}:3: confidence must be a number" in captured.err
    assert ":1:" not in captured.err and ":2:" not in captured.err
    assert kodb_count(vault) == before == 4


def test_skip_invalid_requires_rejects(vault: Path) -> None:
    args = ["--vault", str(vault), "facts", "import", str(FACTS / "bad_line3.jsonl")]
    assert run([*args, "--skip-invalid"]) == EXIT_USAGE


def test_skip_invalid_imports_good_rows_and_writes_rejects(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rejects = tmp_path / "rejects.jsonl"
    args = ["--vault", str(vault), "facts", "import", str(FACTS / "bad_line3.jsonl")]
    assert run([*args, "--skip-invalid", "--rejects", str(rejects), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["inserted"] == 3 and report["existing"] == 0 and report["rejected"] == 1
    [record] = [json.loads(x) for x in rejects.read_text(encoding="utf-8").splitlines()]
    assert record["line"] == 3 and '"Kafka"' in record["text"]
    assert kodb_count(vault) == 3


def test_reimport_is_idempotent_and_reports_existing(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--vault", str(vault), "facts", "import", str(FACTS / "good.csv"), "--json"]
    assert run(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert run(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert (first["format"], first["inserted"], first["existing"]) == ("csv", 3, 0)
    assert (second["inserted"], second["existing"]) == (0, 3)
    assert kodb_count(vault) == 3


def test_explicit_format_overrides_the_extension(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = tmp_path / "facts.txt"
    shutil.copy(FACTS / "good.jsonl", odd)
    assert run(["--vault", str(vault), "facts", "import", str(odd)]) == EXIT_INPUT
    assert "--format" in capsys.readouterr().err
    assert run(["--vault", str(vault), "facts", "import", str(odd), "--format", "jsonl"]) == 0


def test_kodb_url_from_the_environment_is_used(
    vault: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'elsewhere' / 'facts.db'}"
    monkeypatch.setenv("VAULT_KO_KODB_URL", url)
    assert run(["--vault", str(vault), "facts", "import", str(FACTS / "good.jsonl")]) == 0
    with KoDB.open(url) as db:
        assert db.count_facts() == 4
    assert not (vault / ".vault-ko" / "ko.db").exists()


def test_search_json_lists_whole_word_matches_with_facts(
    vault: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["--vault", str(vault), "facts", "import", str(FACTS / "good.jsonl")]) == 0
    capsys.readouterr()
    assert run(["--vault", str(vault), "facts", "search", "warm", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"subjects"}
    names = [s["subject"] for s in data["subjects"]]
    assert names == ["Warm cache"]
    assert all("warmstart" not in n.lower() for n in names)
    [fact] = data["subjects"][0]["facts"]
    assert {k: fact[k] for k in ("predicate", "object", "confidence")} == {
        "predicate": "implemented_by",
        "object": "Redis",
        "confidence": 0.9,
    }
    assert fact["source_type"] == "adr"
    assert fact["source_file"] == "adr/0007-use-redis-as-the-warm-cache.md"


def test_search_hungarian_term_and_human_table(
    vault: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a wide table keeps cells on one line
    assert run(["--vault", str(vault), "facts", "import", str(FACTS / "good.jsonl")]) == 0
    capsys.readouterr()
    assert run(["--vault", str(vault), "facts", "search", "ŐRZŐ"]) == 0
    output = capsys.readouterr().out
    assert "Gyorsítótár őrző" in output and "platform team" in output


def test_search_limit_and_empty_term(
    vault: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {
            "subject": name,
            "predicate": "is",
            "object": "x",
            "confidence": 0.5,
            "source_type": "wiki",
            "source_file": "a.md",
        }
        for name in ("Cache B", "Cache A", "Cachet")
    ]
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert run(["--vault", str(vault), "facts", "import", str(path)]) == 0
    capsys.readouterr()
    search = ["--vault", str(vault), "facts", "search", "cache", "--json"]
    assert run(search) == 0
    assert [s["subject"] for s in json.loads(capsys.readouterr().out)["subjects"]] == [
        "Cache A",
        "Cache B",
    ]
    assert run([*search, "--limit", "1"]) == 0
    assert [s["subject"] for s in json.loads(capsys.readouterr().out)["subjects"]] == ["Cache A"]
    assert run(["--vault", str(vault), "facts", "search", "   "]) == EXIT_INPUT
