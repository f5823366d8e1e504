"""The BEIR reader: layouts, header rows, and file:line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.evaluate.beir import read_collection, read_offtopic, read_qrels

EVAL_DATA = Path(__file__).resolve().parents[1] / "data" / "eval"


def _jsonl(path: Path, rows: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _collection(root: Path, qrels: str = "q1\td1\t1\n") -> Path:
    _jsonl(root / "docs.jsonl", [{"id": "d1", "title": "One", "text": "first"}])
    _jsonl(root / "queries.jsonl", [{"id": "q1", "text": "what is one"}])
    (root / "qrels.tsv").write_text(qrels, encoding="utf-8")
    return root


def test_reads_a_collection_with_a_header_row_and_blank_lines(tmp_path: Path) -> None:
    root = tmp_path / "c"
    _jsonl(
        root / "docs.jsonl",
        [{"id": "d1", "title": " Alpha ", "text": "a"}, {"id": 2, "text": "b"}],
    )
    (root / "queries.jsonl").write_text(
        '{"id": "q1", "text": "alpha?"}\n\n{"id": "q2", "text": "beta?"}\n', encoding="utf-8"
    )
    (root / "qrels.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\n\nq1\t2\t0\nq2\t2\t1\n", encoding="utf-8"
    )
    c = read_collection(root)
    assert c.name == "c"
    assert list(c.docs) == ["d1", "2"]
    assert c.docs["d1"].title == "Alpha"
    assert c.docs["2"].title == ""
    assert c.qrels == {"q1": {"d1": 2, "2": 0}, "q2": {"2": 1}}
    assert [q.id for q in c.judged_queries()] == ["q1", "q2"]
    assert c.warnings == ()


def test_reads_the_original_beir_names_and_trec_qrels(tmp_path: Path) -> None:
    root = tmp_path / "beir"
    _jsonl(root / "corpus.jsonl", [{"_id": "d1", "title": "T", "text": "x"}])
    _jsonl(root / "queries.jsonl", [{"_id": "q1", "text": "x?"}])
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("q1 0 d1 1\n", encoding="utf-8")
    c = read_collection(root)
    assert c.qrels == {"q1": {"d1": 1}}
    assert list(c.docs) == ["d1"]


def test_a_header_is_only_allowed_on_the_first_line(tmp_path: Path) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_text("q1\td1\t1\nquery-id\tcorpus-id\tscore\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_qrels(path)
    assert str(info.value) == f"{path}:2: relevance 'score' is not an integer"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("q1\td1\n", 1, "expected 3 tab-separated fields"),
        ("q1\td1\t1\nq1\td1\t2\n", 2, "conflicting judgements for (q1, d1): 1 and 2"),
        ("q1\td1\t1\nq2\td1\t1.5\n", 2, "relevance '1.5' is not an integer"),
    ],
)
def test_bad_qrels_lines_name_file_and_line(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_qrels(path)
    assert info.value.file == str(path)
    assert info.value.line == line
    assert reason in info.value.reason


def test_a_repeated_identical_judgement_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_text("q1\td1\t1\nq1\td1\t1\n", encoding="utf-8")
    assert read_qrels(path) == {"q1": {"d1": 1}}


@pytest.mark.parametrize(
    ("lines", "line", "reason"),
    [
        (['{"id": "d1", "text": "x"}', "{not json"], 2, "invalid JSON"),
        (['["d1", "x"]'], 1, "expected a JSON object"),
        (['{"title": "no id", "text": "x"}'], 1, 'missing "id"'),
        (['{"id": "d1", "text": "x"}', '{"id": "d1", "text": "y"}'], 2, "duplicate document id"),
        (['{"id": "d1", "text": 5}'], 1, '"text" must be a string'),
    ],
)
def test_bad_document_lines_name_file_and_line(
    tmp_path: Path, lines: list[str], line: int, reason: str
) -> None:
    root = _collection(tmp_path / "c")
    (root / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_collection(root)
    assert info.value.file == str(root / "docs.jsonl")
    assert info.value.line == line
    assert reason in info.value.reason


def test_empty_documents_are_skipped_with_a_warning_not_refused(tmp_path: Path) -> None:
    root = _collection(tmp_path / "c")
    (root / "docs.jsonl").write_text(
        '{"id": "d1", "title": "Roses", "text": "Prune in March."}\n'
        '{"id": "d2", "title": "", "text": "  "}\n'
        '{"id": "d3", "title": "Tulips", "text": "Plant in autumn."}\n',
        encoding="utf-8",
    )
    (root / "qrels.tsv").write_text("q1\td1\t1\nq1\td2\t2\n", encoding="utf-8")
    collection = read_collection(root)
    assert set(collection.docs) == {"d1", "d3"}
    assert any(
        "1 empty document(s) skipped" in w and "'d2' (line 2)" in w for w in collection.warnings
    )
    # The judged empty document stays a relevant one that cannot be found.
    assert collection.qrels["q1"] == {"d1": 1, "d2": 2}
    assert any("can never be retrieved" in w for w in collection.warnings)


def test_only_empty_documents_is_still_an_error(tmp_path: Path) -> None:
    root = _collection(tmp_path / "c")
    (root / "docs.jsonl").write_text('{"id": "d1", "title": "", "text": " "}\n', "utf-8")
    with pytest.raises(InputError, match="no documents"):
        read_collection(root)


def test_a_query_without_text_is_an_error_with_its_line(tmp_path: Path) -> None:
    root = _collection(tmp_path / "c")
    (root / "queries.jsonl").write_text(
        '{"id": "q1", "text": "ok"}\n{"id": "q2", "text": ""}\n', encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"queries\.jsonl:2: query 'q2' has no \"text\""):
        read_collection(root)


def test_missing_files_and_non_utf8_are_input_errors(tmp_path: Path) -> None:
    root = _collection(tmp_path / "c")
    (root / "qrels.tsv").unlink()
    with pytest.raises(InputError, match="no relevance judgements file"):
        read_collection(root)
    root = _collection(tmp_path / "d")
    (root / "docs.jsonl").write_bytes(b'{"id": "d1", "text": "caf\xe9"}\n')
    with pytest.raises(InputError, match="not UTF-8"):
        read_collection(root)
    with pytest.raises(InputError, match="not a directory"):
        read_collection(tmp_path / "nowhere")


def test_judgements_of_unknown_ids_are_warnings_and_none_relevant_is_an_error(
    tmp_path: Path,
) -> None:
    root = _collection(tmp_path / "c", "q1\td1\t1\nq1\tgone\t1\nq9\td1\t1\n")
    c = read_collection(root)
    assert "q9" not in c.qrels
    assert c.qrels["q1"] == {"d1": 1, "gone": 1}
    assert len(c.warnings) == 2
    assert "1 judged query id(s) not in queries.jsonl" in c.warnings[0]
    assert "1 judged document id(s) not among the documents" in c.warnings[1]

    root = _collection(tmp_path / "e", "q1\td1\t0\n")
    with pytest.raises(InputError, match="no relevant judgement"):
        read_collection(root)


def test_an_offtopic_collection_needs_only_its_queries(tmp_path: Path) -> None:
    root = tmp_path / "other"
    _jsonl(root / "queries.jsonl", [{"id": "x1", "text": "a question"}])
    name, queries = read_offtopic(root)
    assert name == "other"
    assert [q.text for q in queries] == ["a question"]


@pytest.mark.parametrize("name", ["gardening", "astronomy"])
def test_the_shipped_test_collections_are_clean_and_big_enough(name: str) -> None:
    c = read_collection(EVAL_DATA / name)
    assert c.warnings == ()
    assert len(c.docs) >= 40
    assert len(c.judged_queries()) >= 20
    assert all(doc.title and doc.text for doc in c.docs.values())
