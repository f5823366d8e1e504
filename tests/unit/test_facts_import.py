"""Reading and validating facts files: every bad row found, located by line, nothing guessed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import FactRowsError, InputError
from pipeline.facts_import import (
    FactFile,
    RowInvalid,
    infer_format,
    read_fact_file,
    validate_row,
    write_rejects,
)
from pipeline.model import Fact

FACTS = Path(__file__).resolve().parents[1] / "data" / "facts"

GOOD: dict[str, Any] = {
    "subject": "Redis",
    "predicate": "used_for",
    "object": "warm cache",
    "confidence": 0.8,
    "source_type": "wiki",
    "source_file": "wiki/redis.md",
}


def _jsonl(tmp_path: Path, lines: list[str | bytes], name: str = "f.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(
        b"\n".join(x if isinstance(x, bytes) else x.encode("utf-8") for x in lines) + b"\n"
    )
    return path


def test_valid_row_becomes_a_fact_with_default_extractor() -> None:
    fact = validate_row(GOOD)
    assert fact == Fact("Redis", "used_for", "warm cache", 0.8, "wiki", "wiki/redis.md", "import")


def test_extractor_and_surrounding_whitespace() -> None:
    fact = validate_row({**GOOD, "subject": "  Redis ", "extractor": "mine"})
    assert (fact.subject, fact.extractor) == ("Redis", "mine")


@pytest.mark.parametrize(
    ("change", "reason_part"),
    [
        ({"subject": None}, "missing field 'subject'"),
        ({"subject": ""}, "field 'subject' is empty"),
        ({"predicate": "   "}, "field 'predicate' is empty"),
        ({"object": 3}, "field 'object' must be a string"),
        ({"source_file": None}, "missing field 'source_file'"),
        ({"confidence": None}, "missing field 'confidence'"),
        ({"confidence": float("nan")}, "finite"),
        ({"confidence": float("inf")}, "finite"),
        ({"confidence": "0.5"}, "got string '0.5'"),
        ({"confidence": True}, "got boolean true"),
        ({"confidence": 1.01}, "in [0, 1]"),
        ({"confidence": -0.1}, "in [0, 1]"),
        ({"source_type": "blog"}, "source_type must be one of session, wiki, adr"),
        ({"source_type": None}, "missing field 'source_type'"),
        ({"subject": "a\x00b"}, "NUL"),
        ({"subject": "a\ud800b"}, "not valid Unicode"),
        ({"extractor": 7}, "field 'extractor' must be a string"),
    ],
)
def test_invalid_json_rows_are_refused_with_a_reason(
    change: dict[str, Any], reason_part: str
) -> None:
    row = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(RowInvalid) as info:
        validate_row(row)
    assert reason_part in str(info.value)


def test_every_problem_of_a_row_is_listed() -> None:
    with pytest.raises(RowInvalid) as info:
        validate_row({"subject": "x", "confidence": "high", "source_type": "blog"})
    reason = str(info.value)
    for part in ("predicate", "object", "source_file", "confidence", "source_type"):
        assert part in reason


@pytest.mark.parametrize(
    ("cell", "ok"),
    [
        ("0.5", True),
        (" 1 ", True),
        ("8e-1", True),
        (".25", True),
        ("nan", False),
        ("inf", False),
        ("Infinity", False),
        ("1_0", False),
        ("0,5", False),
        ("high", False),
        ("", False),
    ],
)
def test_csv_confidence_must_be_a_plain_decimal(cell: str, ok: bool) -> None:
    row = {k: str(v) for k, v in GOOD.items()} | {"confidence": cell}
    if ok:
        assert 0.0 <= validate_row(row, from_csv=True).confidence <= 1.0
    else:
        with pytest.raises(RowInvalid):
            validate_row(row, from_csv=True)


@pytest.mark.parametrize(
    ("name", "fmt", "expected"),
    [
        ("a.jsonl", None, "jsonl"),
        ("a.NDJSON", None, "jsonl"),
        ("a.csv", None, "csv"),
        ("a.txt", "csv", "csv"),
    ],
)
def test_format_is_inferred_from_the_extension_unless_given(
    name: str, fmt: str | None, expected: str
) -> None:
    assert infer_format(name, fmt) == expected


def test_unknown_extension_without_format_is_an_input_error() -> None:
    with pytest.raises(InputError, match="--format"):
        infer_format("facts.txt")


def test_sample_jsonl_reads_all_rows_skipping_blank_lines() -> None:
    ff = read_fact_file(FACTS / "good.jsonl")
    assert ff.format == "jsonl"
    assert ff.rejected == ()
    assert [f.subject for f in ff.facts] == ["Warm cache", "Warmstart", "Gyorsítótár őrző", "Redis"]
    assert ff.facts[2].extractor == "my-extractor"
    assert ff.facts[3].confidence == 1.0


def test_sample_csv_handles_quoted_multiline_cells_and_empty_extractor() -> None:
    ff = read_fact_file(FACTS / "good.csv")
    assert ff.rejected == ()
    assert [f.subject for f in ff.facts] == ["Warm cache", "Őrző, the guard", "Redis"]
    assert ff.facts[1].object == "multi-line\nobject text"
    assert [f.extractor for f in ff.facts] == ["import", "csv-tool", "import"]


def test_bad_line_is_reported_with_its_physical_line_number() -> None:
    ff = read_fact_file(FACTS / "bad_line3.jsonl")
    assert [r.line for r in ff.rejected] == [3]
    assert len(ff.facts) == 3
    [problem] = ff.problems()
    assert str(problem).startswith(f"{FACTS / 'bad_line3.jsonl'}:3: confidence")


def test_malformed_json_non_utf8_and_non_objects_are_bad_rows(tmp_path: Path) -> None:
    good = json.dumps(GOOD)
    path = _jsonl(tmp_path, [good, "{not json", b'{"subject": "\xff"}', "[1, 2]", "", good])
    ff = read_fact_file(path)
    by_line = {r.line: r.reason for r in ff.rejected}
    assert set(by_line) == {2, 3, 4}
    assert by_line[2].startswith("invalid JSON")
    assert "not valid UTF-8" in by_line[3] and "0xff" in by_line[3]
    assert "expected a JSON object" in by_line[4]
    assert len(ff.facts) == 2
    assert [r.text for r in ff.rejected][1] == '{"subject": "\\xff"}'


def test_jsonl_nan_literal_is_refused(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [json.dumps(GOOD).replace("0.8", "NaN")])
    [rejected] = read_fact_file(path).rejected
    assert "finite" in rejected.reason


def test_utf8_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\r\n")
    ff = read_fact_file(path)
    assert ff.rejected == () and len(ff.facts) == 1
    csv_path = tmp_path / "bom.csv"
    header = ",".join(GOOD)
    values = ",".join(str(v) for v in GOOD.values())
    csv_path.write_bytes(b"\xef\xbb\xbf" + f"{header}\r\n{values}\r\n".encode())
    assert len(read_fact_file(csv_path).facts) == 1


def test_csv_missing_required_column_fails_at_the_header_line() -> None:
    with pytest.raises(FactRowsError) as info:
        read_fact_file(FACTS / "missing_column.csv")
    [problem] = info.value.problems
    assert problem.line == 1
    assert "confidence" in problem.reason


def test_csv_bad_rows_keep_their_line_numbers_across_multiline_cells(tmp_path: Path) -> None:
    header = ",".join(GOOD)
    path = tmp_path / "f.csv"
    path.write_bytes(
        (
            f"{header}\n"
            'Redis,is,"two\nlines",0.5,wiki,a.md\n'  # lines 2-3
            "Redis,is,x,1.5,wiki,a.md\n"  # line 4: out of range
            "Redis,is,x\n"  # line 5: too few fields
        ).encode()
        + b"Redis,is,\xff,0.5,wiki,a.md\n"  # line 6: not UTF-8
    )
    ff = read_fact_file(path)
    assert [f.object for f in ff.facts] == ["two\nlines"]
    assert [r.line for r in ff.rejected] == [4, 5, 6]
    assert "has 3 field(s)" in ff.rejected[1].reason
    assert "not valid UTF-8" in ff.rejected[2].reason
    assert ff.rejected[2].text == "Redis,is,\\xff,0.5,wiki,a.md"


def test_csv_bad_bytes_are_located_within_their_field(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_bytes(",".join(GOOD).encode() + b"\nRedis,is,ab\xc3\xa9\xffz,0.5,wiki,a.md\n")
    [row] = read_fact_file(path).rejected
    # "ab" and "é" take 4 bytes: the bad byte is the field's 5th.
    assert row.reason == "not valid UTF-8 (byte 0xff at byte 5 of the field)"


def test_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        read_fact_file(tmp_path / "absent.jsonl")


def test_write_rejects_writes_line_reason_and_original_text(tmp_path: Path) -> None:
    ff = read_fact_file(FACTS / "bad_line3.jsonl")
    out = tmp_path / "rejects.jsonl"
    write_rejects(out, ff)
    [record] = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert record["line"] == 3
    assert "confidence" in record["reason"]
    original = (FACTS / "bad_line3.jsonl").read_text(encoding="utf-8").splitlines()[2]
    assert record["text"] == original


def test_write_rejects_truncates_an_old_file_on_a_clean_run(tmp_path: Path) -> None:
    out = tmp_path / "rejects.jsonl"
    out.write_text("stale\n", encoding="utf-8")
    write_rejects(out, FactFile(path="x", format="jsonl", facts=(), rejected=()))
    assert out.read_text(encoding="utf-8") == ""


def test_long_numbers_are_shown_by_their_digit_count_not_their_digits() -> None:
    with pytest.raises(RowInvalid) as info:
        validate_row({**GOOD, "subject": 10**400, "confidence": -(10**50)})
    assert str(info.value) == (
        "field 'subject' must be a string, got a 401-digit number; "
        "confidence must be in [0, 1], got a 51-digit number"
    )


@pytest.mark.parametrize("name", ["ingest", " Ingest "])
def test_the_reserved_extractor_name_ingest_is_refused(name: str) -> None:
    with pytest.raises(RowInvalid, match="extractor 'ingest' is reserved"):
        validate_row({**GOOD, "extractor": name})
