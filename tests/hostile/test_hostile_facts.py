"""Hostile fact files through `vault-ko facts import`: every bad row is named with its line
and reason, exit 3, and KO-DB is unchanged; formula-looking cells (CSV injection) are stored
as the literal text they are. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import root

ROW = {
    "subject": "Redis",
    "predicate": "p",
    "object": "o",
    "confidence": 0.5,
    "source_type": "wiki",
    "source_file": "a.md",
}


def row(**fields: Any) -> str:
    return json.dumps({**ROW, **fields})


def without(name: str) -> str:
    return json.dumps({k: v for k, v in ROW.items() if k != name})


#: (JSONL line, the reason it must be refused with)
BAD_ROWS = [
    (row(confidence=0.5).replace("0.5", "NaN"), "confidence must be a finite number, got nan"),
    (row(confidence=0.5).replace("0.5", "Infinity"), "finite number, got inf"),
    (row(confidence=0.5).replace("0.5", "-Infinity"), "finite number, got -inf"),
    (row(confidence=1.5), "confidence must be in [0, 1], got 1.5"),
    (row(confidence=-0.1), "confidence must be in [0, 1], got -0.1"),
    (row(confidence=0.5).replace("0.5", "1e400"), "finite number, got inf"),
    (row(confidence=0.5).replace("0.5", "9" * 400), "confidence must be"),
    (row(confidence=0.5).replace("0.5", "9" * 5000), "5000-digit integer is too long"),
    (row(confidence="0.5"), "got string"),
    (row(confidence=True), "got boolean"),
    (without("subject"), "missing field 'subject'"),
    (without("confidence"), "missing field 'confidence'"),
    (without("source_file"), "missing field 'source_file'"),
    (row(source_type="blog"), "source_type must be one of session, wiki, adr"),
    (row(subject="   "), "field 'subject' is empty"),
    (row(subject="a\x00b"), "NUL"),
    (row(subject="\ud800"), "lone surrogate"),
    (row(extractor="ingest"), "reserved"),
    (row(object=[[[[]]]]).replace("[[[[]]]]", "[" * 100_000 + "]" * 100_000), "nested"),
    ("[1, 2]", "expected a JSON object"),
    ("{not json", "invalid JSON"),
]


@dataclass
class Done:
    exit_code: int
    output: str


@pytest.fixture
def url(kodb_url: str) -> str:
    return kodb_url


@pytest.fixture
def vault_ko(
    tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Done]:
    """``vault_ko("facts", …)``: the CLI as its entry point runs it (exit codes included)."""
    vault = tmp_path / "vault"
    vault.mkdir()
    monkeypatch.setenv("VAULT_KO_KODB_URL", url)

    def invoke(*args: str) -> Done:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            root.run(root.cli, ["--vault", str(vault), *args])
        captured = capsys.readouterr()
        code = exited.value.code
        return Done(code if isinstance(code, int) else 1, captured.out + captured.err)

    return invoke


def test_every_hostile_row_is_named_and_nothing_is_written(
    tmp_path: Path,
    url: str,
    vault_ko: Callable[..., Done],
    dump_kodb: Callable[[str], dict[str, list[tuple[Any, ...]]]],
    record_property: Callable[[str, object], None],
) -> None:
    record_property("inputs", len(BAD_ROWS) + 1)
    good = tmp_path / "good.jsonl"
    good.write_text(row(subject="Kept") + "\n")
    assert vault_ko("facts", "import", str(good)).exit_code == 0
    before = dump_kodb(url)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "\n".join([row(subject="Valid but refused with the rest")] + [b for b, _ in BAD_ROWS])
        + "\n"
    )
    result = vault_ko("facts", "import", str(bad))
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    for line, (_, reason) in enumerate(BAD_ROWS, start=2):
        assert f"{bad}:{line}: " in result.output
        [shown] = [x for x in result.output.splitlines() if x.startswith(f"{bad}:{line}: ")]
        assert reason in shown, shown
    assert dump_kodb(url) == before


def test_skip_invalid_imports_the_valid_rows_and_writes_the_bad_ones_aside(
    tmp_path: Path, vault_ko: Callable[..., Done]
) -> None:
    bad = tmp_path / "mixed.jsonl"
    bad.write_text("\n".join([row(subject="Valid"), *(b for b, _ in BAD_ROWS[:5])]) + "\n")
    rejects = tmp_path / "rejects.jsonl"
    result = vault_ko("facts", "import", str(bad), "--skip-invalid", "--rejects", str(rejects))
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert [x["line"] for x in lines] == [2, 3, 4, 5, 6]
    found = vault_ko("facts", "search", "valid", "--json")
    assert [s["subject"] for s in json.loads(found.output)["subjects"]] == ["Valid"]


def test_formula_cells_of_a_csv_are_stored_as_the_literal_text(
    tmp_path: Path, vault_ko: Callable[..., Done]
) -> None:
    csv_file = tmp_path / "inj.csv"
    csv_file.write_text(
        "subject,predicate,object,confidence,source_type,source_file\n"
        '=HYPERLINK("http://x") cache,+cmd,@SUM(1+1),0.5,wiki,-a.md\n'
        '"Redis, ""quoted""",p,"multi\nline",0.9,adr,b.md\n'
    )
    result = vault_ko("facts", "import", str(csv_file))
    assert result.exit_code == 0, result.output
    found = json.loads(vault_ko("facts", "search", "cache", "--json").output)
    [subject] = found["subjects"]
    assert subject["subject"] == '=HYPERLINK("http://x") cache'
    assert [(f["predicate"], f["object"], f["source_file"]) for f in subject["facts"]] == [
        ("+cmd", "@SUM(1+1)", "-a.md")
    ]
    quoted = json.loads(vault_ko("facts", "search", "quoted", "--json").output)
    assert quoted["subjects"][0]["facts"][0]["object"] == "multi\nline"
