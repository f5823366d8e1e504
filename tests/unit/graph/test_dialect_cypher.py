"""Each dialect's Cypher, checked against what its server documents (no server needed).

Memgraph and Neo4j cannot run here, so these tests are what keeps their Cypher right: the
procedure each calls and with which arguments, the score column each yields, the ORDER BY
direction that lists the nearest first on its score scale, the index DDL and the statements
that read an index back. Sources: Memgraph's vector search page and its own
tests/gql_behave vector_search.feature; Neo4j's Cypher manual, "Vector indexes" (5.x).
"""

from __future__ import annotations

import re

import pytest

from pipeline.graph.arcadedb_http import VECTOR_INDEX as ARCADEDB_INDEX
from pipeline.graph.backends import score_scale
from pipeline.graph.backends.memgraph import VECTOR_INDEX as MEMGRAPH_INDEX
from pipeline.graph.cypher import load_query
from pipeline.graph.dialects import ARCADEDB, DIALECTS, MEMGRAPH, NEO4J

#: Per dialect: the search procedure, the index name it is given, the score column it yields.
SEARCH = {
    MEMGRAPH: ("vector_search.search", MEMGRAPH_INDEX, "distance"),
    NEO4J: ("db.index.vector.queryNodes", "note_embedding", "score"),
    ARCADEDB: ("db.index.vector.queryNodes", ARCADEDB_INDEX, "score"),
}


def text(dialect: str, name: str, **inline: int) -> str:
    """The query's statements, whitespace collapsed, with ``inline`` values bound."""
    query = load_query(dialect, name)
    params = {p: None for p in query.params}
    return " ;; ".join(" ".join(t.split()) for t, _ in query.bind(params, inline or None))


# --- vector search ----------------------------------------------------------------------------
@pytest.mark.parametrize("dialect", DIALECTS)
def test_search_calls_the_documented_procedure_with_index_k_and_vector(dialect: str) -> None:
    procedure, index, column = SEARCH[dialect]
    call = f"CALL {procedure}('{index}', $k, $vector) YIELD node, {column} "
    assert text(dialect, "vector_search").startswith(call)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_search_orders_nearest_first_on_its_score_scale_then_by_path(dialect: str) -> None:
    # Memgraph's distance is lower-is-nearer, the others' score higher-is-nearer; LIMIT cuts
    # the over-fetch to the best candidates, so a flipped direction keeps the worst ones.
    direction = score_scale(dialect).nearest_first
    assert text(dialect, "vector_search").endswith(
        f"ORDER BY score {direction}, path ASC LIMIT $limit"
    )


@pytest.mark.parametrize("dialect", DIALECTS)
def test_search_returns_the_score_it_yields_and_the_stored_embedding(dialect: str) -> None:
    column = SEARCH[dialect][2]
    body = text(dialect, "vector_search")
    returned = re.search(r"RETURN (.*) ORDER BY", body)
    assert returned is not None
    items = [item.strip() for item in returned.group(1).split(",")]
    note = "n" if dialect == MEMGRAPH else "node"
    assert items == [
        f"{note}.path AS path",
        f"{note}.title AS title",
        f"{note}.source_type AS source_type",
        f"{note}.embedding AS embedding",
        "score" if column == "score" else f"{column} AS score",
    ]


def test_memgraph_never_uses_its_sign_losing_similarity_column() -> None:
    assert "similarity" not in text(MEMGRAPH, "vector_search")


def test_memgraph_matches_each_candidate_back_by_id() -> None:
    # Its vector index reads uncommitted: a candidate is only used if the node is visible.
    assert (
        "YIELD node, distance WITH id(node) AS candidate, distance "
        "MATCH (n:Note) WHERE id(n) = candidate RETURN"
    ) in text(MEMGRAPH, "vector_search")


# --- the index DDL ----------------------------------------------------------------------------
def test_memgraph_index_is_created_with_config_and_the_cos_metric() -> None:
    # "cos" is what makes distance = 1 - cos, the scale of score_scale(MEMGRAPH).
    assert text(MEMGRAPH, "create_vector_index", dims=384) == (
        f"CREATE VECTOR INDEX {MEMGRAPH_INDEX} ON :Note(embedding) "
        'WITH CONFIG {"dimension": 384, "capacity": 10000, "metric": "cos"}'
    )
    assert score_scale(MEMGRAPH).to_cosine(0.25) == pytest.approx(0.75)


def test_neo4j_index_is_created_with_index_config_and_cosine() -> None:
    assert text(NEO4J, "create_vector_index", dims=384) == (
        "CREATE VECTOR INDEX note_embedding IF NOT EXISTS FOR (n:Note) ON (n.embedding) "
        "OPTIONS {indexConfig: {`vector.dimensions`: 384, "
        "`vector.similarity_function`: 'cosine'}}"
    )
    assert score_scale(NEO4J).to_cosine(0.75) == pytest.approx(0.5)  # (1 + cos) / 2


def test_drop_statements_name_the_same_index() -> None:
    assert text(MEMGRAPH, "drop_vector_index") == f"DROP VECTOR INDEX {MEMGRAPH_INDEX}"
    assert text(NEO4J, "drop_vector_index") == "DROP INDEX note_embedding IF EXISTS"


def test_neo4j_waits_for_its_index_by_name() -> None:
    assert text(NEO4J, "await_vector_index") == "CALL db.awaitIndex('note_embedding', $seconds)"


# --- reading the index and the version back ---------------------------------------------------
def test_memgraph_reads_its_vector_indexes_with_show_vector_index_info() -> None:
    assert text(MEMGRAPH, "vector_index_info") == "SHOW VECTOR INDEX INFO"
    assert {"index_name", "dimension"} <= set(load_query(MEMGRAPH, "vector_index_info").returns)


def test_neo4j_reads_the_dimensions_from_show_vector_indexes() -> None:
    assert text(NEO4J, "vector_index_info") == (
        "SHOW VECTOR INDEXES YIELD name, options "
        "WHERE name IN ['note_embedding', 'passage_embedding'] "
        "RETURN name, options.indexConfig['vector.dimensions'] AS dims"
    )


def test_server_versions_are_read_the_documented_way() -> None:
    assert text(MEMGRAPH, "server_version") == "SHOW VERSION"
    assert text(NEO4J, "server_version") == (
        "CALL dbms.components() YIELD name, versions WHERE name = 'Neo4j Kernel' "
        "RETURN versions[0] AS version"
    )


INDEX_FILES = {
    MEMGRAPH: ("create_vector_index", "drop_vector_index", "vector_search"),
    NEO4J: (
        "create_vector_index",
        "drop_vector_index",
        "vector_search",
        "vector_index_info",
        "await_vector_index",
    ),
}


@pytest.mark.parametrize("dialect", sorted(INDEX_FILES))
def test_every_file_of_a_dialect_names_the_same_vector_index(dialect: str) -> None:
    for name in INDEX_FILES[dialect]:
        inline = {"dims": 8} if name == "create_vector_index" else {}
        assert re.findall(r"\bnote_\w+", text(dialect, name, **inline)) == [SEARCH[dialect][1]]


# --- schema -----------------------------------------------------------------------------------
#: The uniqueness constraint on the generation's name, in each server's documented syntax
#: (Memgraph's "Constraints" page; Neo4j's Cypher manual, "Constraints", 5.x).
GENERATION_CONSTRAINT = {
    MEMGRAPH: "CREATE CONSTRAINT ON (g:VaultGeneration) ASSERT g.name IS UNIQUE",
    NEO4J: "CREATE CONSTRAINT vault_generation_name IF NOT EXISTS "
    "FOR (g:VaultGeneration) REQUIRE g.name IS UNIQUE",
}


@pytest.mark.parametrize("dialect", [MEMGRAPH, NEO4J])
def test_one_generation_node_per_name_after_merging_the_copies(dialect: str) -> None:
    statements = text(dialect, "ensure_schema").split(" ;; ")
    merge = next(i for i, s in enumerate(statements) if s.startswith("MATCH (g:VaultGeneration)"))
    assert statements[merge] == (
        "MATCH (g:VaultGeneration) WITH g ORDER BY coalesce(g.value, 0) DESC "
        "WITH g.name AS name, collect(g)[0] AS kept "
        "MATCH (extra:VaultGeneration {name: name}) WHERE extra <> kept DETACH DELETE extra"
    )
    assert statements[merge + 1 :] == [GENERATION_CONSTRAINT[dialect]]
