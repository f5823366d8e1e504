"""GraphClient against the real local ArcadeDB: what only ArcadeDB has (its agent, its HTTP
schema path) and error handling. What every backend must do is in test_backend_contract.py."""

from __future__ import annotations

import pytest

from pipeline.config import Settings
from pipeline.errors import GraphQueryError
from pipeline.graph import GraphClient
from pipeline.graph.arcadedb_http import ArcadeHttp, ArcadeHttpError
from pipeline.graph.dialects import detect_dialect

pytestmark = pytest.mark.integration

DIMS = 384


@pytest.fixture
def graph(graph_settings: Settings) -> GraphClient:
    client = GraphClient(graph_settings)
    client.ensure_schema(DIMS)
    yield client
    client.close()


def test_server_is_detected_as_arcadedb(graph: GraphClient) -> None:
    assert graph.dialect == "arcadedb"
    status = graph.probe()
    assert status.up and status.dialect == "arcadedb"
    # The agent the unit tests of detect_dialect pin (REAL_AGENTS): update both together.
    assert status.agent == "Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)"
    assert detect_dialect(status.agent) == "arcadedb"


def test_cypher_errors_are_query_errors_and_not_retried(graph: GraphClient) -> None:
    def bad() -> None:
        with graph._session() as session:
            session.run("MATC (n) RETURN n").consume()

    with pytest.raises(GraphQueryError, match="rejected a query"):
        graph.call(bad)
    assert graph.breaker.read().state == "closed"


def test_wrong_password_is_a_query_error(graph_settings: Settings) -> None:
    with GraphClient(graph_settings.replace(graph_password="wrong")) as client:
        with pytest.raises(GraphQueryError, match="credentials"):
            client.note_states()
        assert client.breaker.read().state == "closed"


def test_arcadedb_schema_commands_are_sent_once_per_client(
    graph_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    real_sql = ArcadeHttp.sql

    def counting_sql(self: ArcadeHttp, database: str, command: str) -> list[dict]:
        sent.append(command)
        return real_sql(self, database, command)

    monkeypatch.setattr(ArcadeHttp, "sql", counting_sql)
    with GraphClient(graph_settings) as client:
        client.ensure_schema(DIMS)  # also reads the vector index dims
        client.ensure_schema(DIMS)
        assert client.vector_index_dims() == DIMS
    # Note, VaultGeneration (the note vectors' generation) and Passage, each once.
    assert sum(c.startswith("CREATE VERTEX TYPE") for c in sent) == 3


def test_the_generation_counts_upserts_and_deletes(
    graph_settings: Settings,
) -> None:
    from pipeline.graph import GraphNote

    with GraphClient(graph_settings) as client:
        client.ensure_schema(DIMS)
        start = client.generation()
        note = GraphNote("gen/a.md", "A", "wiki", "h", "m", DIMS, 1.0, (1.0,) + (0.0,) * (DIMS - 1))
        client.upsert_notes([note])
        assert client.generation() == start + 1
        client.upsert_notes([])  # nothing sent, nothing counted
        client.delete_notes([note.path])
        assert client.generation() == start + 2


def test_generation_copies_made_before_the_unique_index_are_merged_into_the_highest(
    graph: GraphClient, graph_settings: Settings
) -> None:
    http, database = graph.backend._http(graph)  # type: ignore[attr-defined]
    http.sql(database, "DROP INDEX `VaultGeneration[name]`")
    http.sql(database, "DELETE FROM VaultGeneration")
    for value in (3, 7, 5):
        http.sql(database, f"INSERT INTO VaultGeneration SET name = 'notes', value = {value}")
    with GraphClient(graph_settings) as fresh:
        fresh.ensure_schema(DIMS)
        assert fresh.generation() == 7
    rows = http.sql(database, "SELECT name, value FROM VaultGeneration")
    assert [(r["name"], r["value"]) for r in rows] == [("notes", 7)]
    with pytest.raises(ArcadeHttpError, match=r"(?i)duplicate"):
        http.sql(database, "INSERT INTO VaultGeneration SET name = 'notes', value = 1")
