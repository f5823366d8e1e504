"""Each backend's guards, through the client and the fake driver (no network): the server
version, the dimension caps, the index read back after a create, Neo4j's awaitIndex, the
order of an index change, and what vector search refuses or skips."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pipeline.errors import GraphQueryError
from pipeline.graph import GraphClient
from pipeline.graph.backends import backend_class
from pipeline.graph.backends.base import parse_version
from pipeline.graph.cypher import CypherLoadError

MEMGRAPH_AGENT = "Neo4j/v5.11.0 compatible graph database server - Memgraph"

#: The fixtures of tests/unit/graph/conftest.py: the fake driver class, a client maker.
Drivers = Callable[..., Any]
Clients = Callable[..., GraphClient]


# --- the version guard ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "version"),
    [("3.10.1", (3, 10, 1)), ("v5.11.0", (5, 11, 0)), ("2025.01.0", (2025, 1, 0)), ("x", None)],
)
def test_versions_are_parsed_from_what_servers_say(text: str, version: tuple | None) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize("version", ["5.15.0", "5.26.0", "2025.01.0"])
def test_neo4j_from_5_15_is_accepted(
    fake_driver: Drivers, client_with: Clients, version: str
) -> None:
    driver = fake_driver([], agent="Neo4j/" + version, version=version)
    client = client_with(driver)
    client.note_states()
    assert client.backend.version == version


def test_neo4j_before_5_15_is_refused_with_its_version(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver([], agent="Neo4j/5.14.0", version="5.14.0")
    client = client_with(driver)
    with pytest.raises(GraphQueryError, match=r"runs Neo4j 5\.14\.0; vault-ko needs Neo4j 5\.15"):
        client.note_states()
    assert driver.runs == []  # nothing but the version query reached the server
    assert client.breaker.read().state == "closed"


def test_the_version_is_asked_once_per_client(fake_driver: Drivers, client_with: Clients) -> None:
    driver = fake_driver([], [], [])
    client = client_with(driver)
    client.note_states()
    client.note_states()
    client.ping()
    assert sum("dbms.components" in s for s in driver.statements) == 1


@pytest.mark.parametrize(("version", "ok"), [("2.21.1", False), ("3.0.0", True), ("3.10.1", True)])
def test_memgraph_needs_3_0_by_its_own_version_not_its_agent(
    fake_driver: Drivers, client_with: Clients, version: str, ok: bool
) -> None:
    # Its agent names Neo4j 5.11 whatever Memgraph it is: SHOW VERSION is asked.
    client = client_with(fake_driver([], agent=MEMGRAPH_AGENT, version=version))
    if ok:
        client.note_states()
        assert client.dialect == "memgraph" and client.backend.version == version
    else:
        with pytest.raises(
            GraphQueryError, match=r"runs Memgraph 2\.21\.1; vault-ko needs Memgraph 3\.0"
        ):
            client.note_states()


def test_arcadedb_version_comes_from_its_agent(fake_driver: Drivers, client_with: Clients) -> None:
    old = fake_driver([], agent="Neo4j/5.26.0 compatible (ArcadeDB 25.12.1)")
    with pytest.raises(
        GraphQueryError, match=r"ArcadeDB 25\.12\.1; vault-ko needs ArcadeDB 26\.10"
    ):
        client_with(old).note_states()
    assert old.statements == []  # no version query: ArcadeDB's agent says it
    current = fake_driver([], agent="Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)")
    client = client_with(current)
    client.note_states()
    assert client.backend.version == "26.10.2"


def test_an_unreadable_version_is_refused_clearly(
    fake_driver: Drivers, client_with: Clients
) -> None:
    client = client_with(fake_driver([], version="enterprise"))
    with pytest.raises(GraphQueryError, match="cannot read the Neo4j version"):
        client.note_states()


def test_probe_reports_a_server_too_old_as_down_with_the_reason(
    fake_driver: Drivers, client_with: Clients
) -> None:
    status = client_with(fake_driver(agent=MEMGRAPH_AGENT, version="2.19.0")).probe()
    assert (status.up, status.dialect, status.agent) == (False, "memgraph", MEMGRAPH_AGENT)
    assert "needs Memgraph 3.0 or newer" in (status.reason or "")


def test_an_unknown_agent_needs_graph_dialect(fake_driver: Drivers, client_with: Clients) -> None:
    with pytest.raises(GraphQueryError, match="set graph_dialect"):
        client_with(fake_driver([], agent="FalkorDB/4.2.0")).note_states()
    client = client_with(fake_driver([], agent="FalkorDB/4.2.0"), graph_dialect="neo4j")
    client.note_states()
    assert client.dialect == "neo4j"


# --- dimension caps and the index lifecycle --------------------------------------------------
@pytest.mark.parametrize(("agent", "cap"), [("Neo4j/5.26.0", 4_096), (MEMGRAPH_AGENT, 65_535)])
def test_each_backend_caps_the_index_dimensions(
    fake_driver: Drivers, client_with: Clients, agent: str, cap: int
) -> None:
    driver = fake_driver(agent=agent, version="5.26.0" if "Memgraph" not in agent else "3.10.1")
    client = client_with(driver)
    with pytest.raises(
        GraphQueryError, match=f"at most {cap:,} dimensions; the embedding model has {cap + 1:,}"
    ):
        client.ensure_vector_index(cap + 1)
    assert not any(s.startswith(("CREATE", "DROP")) for s in driver.statements)
    client.ensure_vector_index(cap)
    assert driver.index_dims == cap


def test_arcadedb_keeps_the_bound_it_had() -> None:
    assert backend_class("arcadedb").max_dims == 65_536


def test_a_create_the_server_did_not_apply_is_an_error(
    fake_driver: Drivers, client_with: Clients
) -> None:
    # Memgraph answers a refused CREATE VECTOR INDEX with a notification, not an error.
    driver = fake_driver(agent=MEMGRAPH_AGENT, version="3.10.1", index_dims=None)
    driver.create_fails = True
    with pytest.raises(GraphQueryError, match="did not create the note vector index with 384"):
        client_with(driver).ensure_vector_index(384)


def test_neo4j_waits_for_a_new_index_to_come_online(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver(index_dims=None)
    client_with(driver).ensure_vector_index(384)
    creates = [i for i, s in enumerate(driver.statements) if s.startswith("CREATE VECTOR")]
    waits = [i for i, s in enumerate(driver.statements) if "db.awaitIndex" in s]
    assert len(creates) == 2 and len(waits) == 2
    assert waits == [c + 1 for c in creates]
    assert "'note_embedding'" in driver.statements[waits[0]]
    assert "'passage_embedding'" in driver.statements[waits[1]]


def test_memgraph_deletes_other_dims_notes_before_dropping_the_index(
    fake_driver, client_with
) -> None:
    driver = fake_driver(agent=MEMGRAPH_AGENT, version="3.10.1", index_dims=8, passage_dims=8)
    client_with(driver).ensure_vector_index(384)
    kinds = [
        "delete" if "DELETE" in s else " ".join(s.split()[:4])
        for s in driver.statements
        if "DELETE" in s or s.startswith(("DROP", "CREATE VECTOR"))
    ]
    assert kinds == [
        "delete",
        "delete",
        "DROP VECTOR INDEX note_embedding",
        "CREATE VECTOR INDEX note_embedding",
        "DROP VECTOR INDEX passage_embedding",
        "CREATE VECTOR INDEX passage_embedding",
    ]
    assert driver.index_dims == 384 and driver.passage_dims == 384


def test_a_graph_from_before_passages_gains_their_index_and_keeps_its_notes(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver(agent=MEMGRAPH_AGENT, version="3.10.1", index_dims=384)
    client_with(driver).ensure_vector_index(384)
    assert not any("DETACH DELETE" in s for s in driver.statements)  # no note is deleted
    assert not any(s.startswith("DROP") for s in driver.statements)
    assert [s.split()[3] for s in driver.statements if s.startswith("CREATE VECTOR")] == [
        "passage_embedding"
    ]
    assert driver.index_dims == 384 and driver.passage_dims == 384


def test_an_index_of_the_right_dims_is_left_alone(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver(index_dims=384, passage_dims=384)
    client_with(driver).ensure_vector_index(384)
    assert not any("DELETE" in s or s.startswith(("DROP", "CREATE")) for s in driver.statements)


# --- search ------------------------------------------------------------------------------------
ROWS = [
    {"path": "a.md", "title": "A", "source_type": "wiki", "embedding": [1.0, 0.0], "score": 1.0},
    {"path": None, "title": None, "source_type": None, "embedding": None, "score": 0.9},
    {"path": "b.md", "title": "B", "source_type": "adr", "embedding": [0.0, 1.0], "score": 0.5},
]


def test_a_query_vector_of_other_dims_is_refused_before_it_is_sent(
    fake_driver, client_with
) -> None:
    driver = fake_driver(index_dims=2)
    client = client_with(driver)
    with pytest.raises(
        GraphQueryError, match="has 3 dimensions but the graph's note vector index has 2"
    ):
        client.vector_search([1.0, 0.0, 0.0], 5)  # type: ignore[arg-type]
    assert driver.runs == []


def test_an_index_rebuilt_with_new_dims_is_read_again(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver(ROWS[:1], [{**ROWS[0], "embedding": [1.0, 0.0, 0.0]}], index_dims=2)
    client = client_with(driver)
    assert [h.path for h in client.vector_search([1.0, 0.0], 1)] == ["a.md"]  # type: ignore[arg-type]
    driver.index_dims = 3  # another process re-embedded the vault with a 3-d model
    assert [h.path for h in client.vector_search([1.0, 0.0, 0.0], 1)] == ["a.md"]  # type: ignore[arg-type]


def test_search_without_an_index_says_to_sync(fake_driver: Drivers, client_with: Clients) -> None:
    client = client_with(fake_driver(index_dims=None))
    with pytest.raises(GraphQueryError, match="no note vector index yet; run `vault-ko sync`"):
        client.vector_search([1.0, 0.0], 5)  # type: ignore[arg-type]


def test_a_candidate_deleted_meanwhile_is_skipped(
    fake_driver: Drivers, client_with: Clients
) -> None:
    client = client_with(fake_driver(ROWS, agent=MEMGRAPH_AGENT, version="3.10.1"))
    hits = client.vector_search([1.0, 0.0], 5)  # type: ignore[arg-type]
    assert [h.path for h in hits] == ["a.md", "b.md"]


def test_the_client_runs_only_the_queries_its_backend_declares(
    fake_driver: Drivers, client_with: Clients
) -> None:
    client = client_with(fake_driver(agent="Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)"))
    with pytest.raises(CypherLoadError, match="declares no query 'ensure_schema'"):
        client.auto("ensure_schema")


def test_search_adds_the_passage_index_and_keeps_a_note_s_best_passage(
    fake_driver: Drivers, client_with: Clients
) -> None:
    notes = [
        {"path": "long.md", "title": "L", "source_type": "wiki", "embedding": [0.0, 1.0]},
        {"path": "short.md", "title": "S", "source_type": "wiki", "embedding": [1.0, 1.0]},
    ]
    passages = [{"path": "long.md", "title": "L", "source_type": "wiki", "embedding": [1.0, 0.0]}]
    driver = fake_driver(
        [{**r, "score": 0.5} for r in notes],
        [{**r, "score": 1.0} for r in passages],
        index_dims=2,
        passage_dims=2,
    )
    hits = client_with(driver).vector_search([1.0, 0.0], 5)  # type: ignore[arg-type]
    # long.md: its passage (cos 1) less the discount beats its own vector (cos 0)
    assert [(h.path, round(h.cosine, 3)) for h in hits] == [("long.md", 0.95), ("short.md", 0.707)]
    assert "'passage_embedding'" in driver.runs[1][0]


def test_a_graph_without_a_passage_index_is_searched_by_its_notes_alone(
    fake_driver: Drivers, client_with: Clients
) -> None:
    driver = fake_driver(ROWS, index_dims=2, passage_dims=None)
    hits = client_with(driver).vector_search([1.0, 0.0], 5)  # type: ignore[arg-type]
    assert [h.path for h in hits] == ["a.md", "b.md"] and len(driver.runs) == 1


def test_all_vectors_gives_a_long_note_a_row_per_passage_next_to_its_own(
    fake_driver: Drivers, client_with: Clients
) -> None:
    state = {"content_hash": "h", "model": "m", "dims": 2, "embedded_at": 1.0, "text_version": 2}
    driver = fake_driver(
        [
            {"path": "a.md", **state, "embedding": [1.0, 0.0]},
            {"path": "long.md", **state, "embedding": [0.0, 1.0]},
            {"path": "z.md", **state, "embedding": [1.0, 1.0]},
        ],
        [
            {"path": "long.md", "idx": 1, "embedding": [0.5, 0.5]},
            {"path": "long.md", "idx": 2, "embedding": [0.25, 0.75]},
        ],
    )
    states, matrix = client_with(driver).all_vectors()
    assert [s.path for s in states] == ["a.md", "long.md", "long.md", "long.md", "z.md"]
    assert matrix.tolist() == [[1, 0], [0, 1], [0.5, 0.5], [0.25, 0.75], [1, 1]]
