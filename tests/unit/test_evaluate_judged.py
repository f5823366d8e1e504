"""Judged question sets: the reader, its file:line errors, and the shipped sets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.evaluate.judged import read_judged

JUDGED = Path(__file__).resolve().parents[1] / "data" / "judged"


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), "utf-8"
    )
    return path


def test_reads_questions_with_case_folded_subjects_and_splits(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "j.jsonl",
        [
            {"question": "why redis?", "relevant": {"Redis": 2, "Warm cache": 1}, "split": "tune"},
            "",
            {"question": "Gyorsítótár?", "relevant": {"Gyorsítótár-invalidálás": 2}},
        ],
    )
    first, second = read_judged(f)
    assert first.line == 1 and first.split == "tune"
    assert first.relevant == {"redis": 2, "warm cache": 1}
    assert first.answers == {"redis"}
    assert first.names["warm cache"] == "Warm cache"
    assert second.line == 3 and second.split is None
    assert second.relevant == {"gyorsítótár-invalidálás": 2}


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("{not json", "invalid JSON"),
        ('["q"]', "expected a JSON object"),
        ({"question": "", "relevant": {"A": 2}}, "question must be a non-empty string"),
        ({"question": "q", "relevant": {}}, "relevant must be an object"),
        ({"question": "q", "relevant": {"A": 3}}, "grade of 'A' must be 1 or 2"),
        ({"question": "q", "relevant": {"A": True}}, "grade of 'A' must be 1 or 2"),
        ({"question": "q", "relevant": {"A": 1}}, "no subject of grade 2"),
        ({"question": "q", "relevant": {"A": 2, "a": 1}}, "graded twice"),
        ({"question": "q", "relevant": {"A": 2}, "split": "dev"}, "split must be one of"),
        ({"question": "q", "relevant": {"A": 2}, "extra": 1}, "unknown key(s): extra"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, row: object, reason: str) -> None:
    f = _write(tmp_path / "j.jsonl", [{"question": "ok", "relevant": {"B": 2}}, row])
    with pytest.raises(InputError) as info:
        read_judged(f)
    assert info.value.file == str(f)
    assert info.value.line == 2
    assert reason in info.value.reason


def test_a_repeated_question_and_an_empty_file_are_errors(tmp_path: Path) -> None:
    row = {"question": "Why Redis?", "relevant": {"Redis": 2}}
    with pytest.raises(InputError, match=r"repeated \(first on line 1"):
        read_judged(_write(tmp_path / "a.jsonl", [row, {**row, "question": "why redis?"}]))
    with pytest.raises(InputError, match="no judged questions"):
        read_judged(_write(tmp_path / "b.jsonl", [""]))


@pytest.mark.parametrize(("name", "minimum"), [("examples-vault", 30), ("library", 20)])
def test_the_shipped_judged_sets_are_clean_and_split_in_halves(name: str, minimum: int) -> None:
    questions = read_judged(JUDGED / f"{name}.jsonl")
    assert len(questions) >= minimum
    tune = [q for q in questions if q.split == "tune"]
    test = [q for q in questions if q.split == "test"]
    assert len(tune) + len(test) == len(questions)
    assert abs(len(tune) - len(test)) <= 1


def test_a_line_break_character_inside_a_question_does_not_end_its_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    rows = [
        {"question": "why\u2028redis?", "relevant": {"Redis": 2}},
        {"question": "b", "relevant": {"B": 2}},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows), "utf-8")
    assert [q.question for q in read_judged(path)] == ["why\u2028redis?", "b"]
