"""The streaming facts import on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.errors import FactRowsError, RowProblem
from pipeline.facts_import import FactStream
from pipeline.kodb import ImportResult, KoDB
from pipeline.model import Fact

pytestmark = pytest.mark.integration


def fact(i: int) -> Fact:
    return Fact(
        subject=f"subject {i % 7}",
        predicate="is",
        object=f"value {i}",
        confidence=0.5,
        source_type="wiki",
        source_file=f"wiki/{i % 3}.md",
        extractor="import",
    )


@pytest.fixture
def db(kodb_url: str) -> Iterator[KoDB]:
    with KoDB.open(kodb_url) as store:
        yield store


def test_stream_is_read_in_batches_and_counts_repeats_across_batches(db: KoDB) -> None:
    pulled: list[int] = []

    def stream() -> Iterator[Fact]:
        for i in range(25):
            pulled.append(i)
            yield fact(i % 20)  # rows 20..24 repeat rows 0..4, in a later batch

    assert db.import_facts(stream(), batch_size=4) == ImportResult(inserted=20, existing=5)
    assert len(pulled) == 25
    assert db.count_facts() == 20


def test_an_error_raised_mid_stream_rolls_back_every_batch(db: KoDB) -> None:
    db.import_facts([fact(100)])

    def stream() -> Iterator[Fact]:
        for i in range(10):
            yield fact(i)
        raise FactRowsError([RowProblem("f.jsonl", 11, "bad")])

    with pytest.raises(FactRowsError):
        db.import_facts(stream(), batch_size=3)
    assert db.count_facts() == 1
    assert db.subject_norms() == ["subject 2"]


def test_a_file_streamed_into_kodb_keeps_file_order_and_reports_bad_rows(
    db: KoDB, tmp_path: Path
) -> None:
    path = tmp_path / "facts.jsonl"
    rows = [fact(i) for i in range(9)]
    lines = [
        json.dumps(
            {
                "subject": f.subject,
                "predicate": f.predicate,
                "object": f.object,
                "confidence": f.confidence,
                "source_type": f.source_type,
                "source_file": f.source_file,
            }
        )
        for f in rows
    ]
    lines.insert(4, '{"subject": "x"}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stream = FactStream(path)
    assert db.import_facts(stream.facts(), batch_size=2) == ImportResult(inserted=9, existing=0)
    assert (stream.rows, stream.valid) == (10, 9)
    assert [p.line for p in stream.problems()] == [5]
