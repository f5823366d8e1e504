"""The Cypher loader: every dialect has the same queries and interfaces; binding is strict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.graph.backends import backend_class
from pipeline.graph.backends.base import DATA_QUERIES
from pipeline.graph.cypher import (
    CYPHER_PACKAGE,
    CypherLoadError,
    cypher_root,
    load_query,
    parse_query,
    query_names,
)
from pipeline.graph.dialects import DIALECTS

#: SHOW statements answer in each server's own columns, which its backend parses
#: (``read_index_dims``), so only these may declare different returns across dialects.
SERVER_SHAPED = {"vector_index_info"}
ALL_NAMES = sorted(set().union(*(backend_class(d).queries for d in DIALECTS)))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_dialect_folder_holds_exactly_the_queries_its_backend_declares(dialect: str) -> None:
    assert query_names(dialect) == backend_class(dialect).queries


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_backend_has_the_shared_data_queries(dialect: str) -> None:
    assert backend_class(dialect).queries >= DATA_QUERIES


@pytest.mark.parametrize("name", ALL_NAMES)
def test_a_query_shared_by_dialects_declares_the_same_interface(name: str) -> None:
    interfaces = {
        d: (q.params, q.inline, None if name in SERVER_SHAPED else q.returns)
        for d in DIALECTS
        if name in backend_class(d).queries
        for q in [load_query(d, name)]
    }
    assert len(set(interfaces.values())) == 1, interfaces


def test_the_files_are_read_from_the_installed_package() -> None:
    root = cypher_root()
    assert root.joinpath("neo4j", "ping.cypher").is_file()
    assert CYPHER_PACKAGE == "pipeline.cypher_files"
    assert load_query("neo4j", "ping").path == root.joinpath("neo4j", "ping.cypher")


def test_no_cypher_file_inlines_a_value_other_than_declared_integers() -> None:
    # Values travel as parameters: the only {{…}} placeholders are declared inline names.
    for dialect in DIALECTS:
        for name in query_names(dialect):
            query = load_query(dialect, name)
            body = "\n".join(query.statements)
            assert set(re.findall(r"\{\{\s*(\w+)\s*\}\}", body)) <= set(query.inline)


def test_missing_file_fails_loudly(tmp_path: Path) -> None:
    (tmp_path / "neo4j").mkdir()
    with pytest.raises(CypherLoadError, match=r"missing Cypher file .*nope\.cypher"):
        load_query("neo4j", "nope", tmp_path)


def test_invalid_reference_is_refused() -> None:
    with pytest.raises(CypherLoadError):
        load_query("../etc", "passwd")


def test_bind_requires_exactly_the_declared_params() -> None:
    query = load_query("neo4j", "vector_search")
    with pytest.raises(CypherLoadError, match=r"missing parameter.*vector"):
        query.bind({"k": 3, "limit": 3})
    with pytest.raises(CypherLoadError, match=r"undeclared parameter.*extra"):
        query.bind({"k": 3, "limit": 3, "vector": [0.1], "extra": 1})
    [(text, params)] = query.bind({"k": 3, "limit": 3, "vector": [0.1]})
    assert params == {"k": 3, "limit": 3, "vector": [0.1]}
    assert "$k" in text and "$vector" in text


@pytest.mark.parametrize("bad", [0, -4, 70_000, True, "384", 3.0])
def test_inline_values_must_be_valid_integers(bad: object) -> None:
    query = load_query("memgraph", "create_vector_index")
    with pytest.raises(CypherLoadError):
        query.bind({}, {"dims": bad})  # type: ignore[dict-item]


def test_inline_integer_is_written_into_the_ddl() -> None:
    [(text, params)] = load_query("memgraph", "create_vector_index").bind({}, {"dims": 384})
    assert '"dimension": 384' in text and '"metric": "cos"' in text
    assert params == {}


def test_multi_statement_files_split_on_line_end_semicolons() -> None:
    statements = load_query("memgraph", "ensure_schema").bind({})
    assert [t for t, _ in statements][:3] == [
        "CREATE INDEX ON :Note(path)",
        "CREATE CONSTRAINT ON (n:Note) ASSERT n.path IS UNIQUE",
        "CREATE INDEX ON :Passage(path)",
    ]
    assert len(statements) == 5  # a statement over lines is one


def test_a_file_without_a_statement_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CypherLoadError, match="no statement"):
        parse_query("neo4j", "q", "// params: (none)\n// returns: x\n\n", tmp_path / "q.cypher")


def test_header_must_match_the_body(tmp_path: Path) -> None:
    text = "// params: a\n// returns: x\nRETURN $a AS x, $b AS y\n"
    with pytest.raises(CypherLoadError, match="declared params"):
        parse_query("neo4j", "q", text, tmp_path / "q.cypher")
    with pytest.raises(CypherLoadError, match="must declare"):
        parse_query("neo4j", "q", "RETURN 1\n", tmp_path / "q.cypher")
    with pytest.raises(CypherLoadError, match="declared inline"):
        parse_query(
            "neo4j",
            "q",
            "// params: (none)\n// returns: x\nRETURN {{n}} AS x\n",
            tmp_path / "q.cypher",
        )


def test_parameters_are_only_passed_to_the_statements_that_use_them(tmp_path: Path) -> None:
    text = "// params: a, b\n// returns: y\nCREATE (n {a: $a});\nRETURN $b AS y;\n"
    query = parse_query("neo4j", "q", text, tmp_path / "q.cypher")
    assert [p for _, p in query.bind({"a": 1, "b": 2})] == [{"a": 1}, {"b": 2}]
