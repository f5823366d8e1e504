"""The backend contract: the same tests on every graph server (``backend_settings``).

ArcadeDB (the local server) always runs; Memgraph and Neo4j run when their
VAULT_KO_TEST_*_URL is set (`docker compose up -d` then `make test-backends`), and are
reported as skipped ("not run: set …") otherwise. Each test starts from an empty graph.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from pipeline.config import Settings
from pipeline.errors import GraphQueryError
from pipeline.graph import GraphClient, GraphNote
from pipeline.graph.scoring import PASSAGE_DISCOUNT

pytestmark = pytest.mark.integration

DIMS = 384


def unit_vectors(n: int, dims: int = DIMS, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dims))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def note(path: str, vector: np.ndarray, **fields: object) -> GraphNote:
    values: dict[str, object] = {
        "title": f"title of {path}",
        "source_type": "wiki",
        "content_hash": f"hash-{path}",
        "model": "test-model",
        "dims": int(vector.shape[0]),
        "embedded_at": 1_700_000_000.25,
    }
    values.update(fields)
    return GraphNote(path=path, embedding=tuple(vector.tolist()), **values)  # type: ignore[arg-type]


@pytest.fixture
def graph(backend_settings: Settings) -> Iterator[GraphClient]:
    client = GraphClient(backend_settings)
    client.ensure_schema(DIMS)
    yield client
    client.close()


def test_the_server_is_detected_and_its_version_checked(
    graph: GraphClient, backend_settings: Settings
) -> None:
    status = graph.probe()
    assert status.up, status.reason
    assert graph.dialect in ("arcadedb", "memgraph", "neo4j")
    assert graph.backend.version  # checked at the first call, against its minimum


def test_upsert_and_note_states_round_trip(graph: GraphClient) -> None:
    vectors = unit_vectors(3)
    notes = [note(f"wiki/n{i}.md", vectors[i], source_type="adr") for i in range(3)]
    graph.upsert_notes(notes)
    graph.upsert_notes(notes)  # idempotent: MERGE on path
    states = graph.note_states()
    assert sorted(states) == ["wiki/n0.md", "wiki/n1.md", "wiki/n2.md"]
    state = states["wiki/n1.md"]
    assert (state.content_hash, state.model, state.dims) == ("hash-wiki/n1.md", "test-model", DIMS)
    assert state.embedded_at == 1_700_000_000.25


def test_all_vectors_are_the_stored_float32_rows_sorted_by_path(graph: GraphClient) -> None:
    vectors = unit_vectors(3)
    graph.upsert_notes([note(f"n{i}.md", vectors[i]) for i in (2, 0, 1)])
    states, matrix = graph.all_vectors()
    assert [s.path for s in states] == ["n0.md", "n1.md", "n2.md"]
    assert matrix.dtype == np.float32 and matrix.shape == (3, DIMS)
    np.testing.assert_array_equal(matrix, vectors)  # float32 stored exactly


def test_upsert_updates_changed_fields(graph: GraphClient) -> None:
    vectors = unit_vectors(2)
    graph.upsert_notes([note("a.md", vectors[0])])
    graph.upsert_notes([note("a.md", vectors[1], content_hash="new", title="New")])
    assert graph.note_states()["a.md"].content_hash == "new"
    _, matrix = graph.all_vectors()
    np.testing.assert_array_equal(matrix[0], vectors[1])
    [hit] = graph.vector_search(vectors[1], 1)
    assert (hit.path, hit.title) == ("a.md", "New")
    assert hit.cosine == pytest.approx(1.0, abs=1e-6)


def test_notes_and_their_links_are_written_in_one_call(graph: GraphClient) -> None:
    vectors = unit_vectors(3)
    graph.upsert_notes([note("a.md", vectors[0])])
    # b.md and c.md are created by the same transaction that links them (and a.md to b.md).
    written = graph.upsert_notes_with_links(
        [note("b.md", vectors[1]), note("c.md", vectors[2])],
        ["a.md", "b.md", "c.md"],
        [("a.md", "b.md"), ("b.md", "c.md"), ("c.md", "gone.md")],
    )
    assert written == 2
    assert sorted(graph.note_states()) == ["a.md", "b.md", "c.md"]
    assert graph.neighbors(["b.md"]) == [("b.md", "a.md", False), ("b.md", "c.md", True)]


def test_notes_written_with_their_links_move_the_generation(graph: GraphClient) -> None:
    vectors = unit_vectors(2)
    graph.upsert_notes([note("a.md", vectors[0])])
    start = graph.generation()
    assert graph.upsert_notes_with_links([note("b.md", vectors[1])], ["b.md"], [("b.md", "a.md")])
    assert graph.generation() == start + 1  # the warm service must see the new vector
    graph.upsert_notes_with_links([], ["a.md"], [("a.md", "b.md")])
    assert graph.generation() == start + 1  # links alone change no vector


def test_remembered_states_follow_own_writes_and_are_read_again_after_a_foreign_one(
    graph: GraphClient, backend_settings: Settings
) -> None:
    vectors = unit_vectors(4)
    graph.upsert_notes([note("a.md", vectors[0]), note("b.md", vectors[1])])
    graph.remember_states()
    reads: list[int] = []
    backend = graph.backend
    read = backend.note_states

    def counted(runner: object) -> object:
        reads.append(1)
        return read(runner)  # type: ignore[arg-type]

    backend.note_states = counted  # type: ignore[method-assign]
    try:
        assert sorted(graph.note_states()) == ["a.md", "b.md"] and len(reads) == 1
        # Its own writes: remembered, no read (generation one higher per write).
        graph.upsert_notes_with_links([note("c.md", vectors[2])], ["c.md"], [("c.md", "a.md")])
        graph.delete_notes(["a.md"])
        graph.upsert_notes_with_links([], ["b.md"], [("b.md", "c.md")])  # links: no bump
        assert sorted(graph.note_states()) == ["b.md", "c.md"] and len(reads) == 1
        assert graph.note_states() == read(graph) and len(reads) == 1
        # Another client's write moves the generation past what this one knows.
        other = GraphClient(backend_settings)
        try:
            other.upsert_notes([note("d.md", vectors[3], content_hash="changed")])
        finally:
            other.close()
        states = graph.note_states()
        assert sorted(states) == ["b.md", "c.md", "d.md"] and len(reads) == 2
        assert states["d.md"].content_hash == "changed"
    finally:
        del backend.note_states


def test_delete_notes_removes_nodes_and_their_links(graph: GraphClient) -> None:
    vectors = unit_vectors(3)
    graph.upsert_notes([note(p, vectors[i]) for i, p in enumerate(["a.md", "b.md", "c.md"])])
    assert graph.set_links(["a.md"], [("a.md", "b.md")]) == 1
    graph.delete_notes(["b.md", "never-existed.md"])
    assert sorted(graph.note_states()) == ["a.md", "c.md"]
    assert graph.neighbors(["a.md"]) == []
    hits = graph.vector_search(vectors[1], 3)
    assert hits and "b.md" not in {h.path for h in hits}


def test_set_links_replaces_outgoing_edges_and_skips_missing_targets(graph: GraphClient) -> None:
    vectors = unit_vectors(4)
    graph.upsert_notes(
        [note(p, vectors[i]) for i, p in enumerate(["a.md", "b.md", "c.md", "d.md"])]
    )
    written = graph.set_links(
        ["a.md", "d.md"],
        [("a.md", "b.md"), ("a.md", "gone.md"), ("d.md", "a.md"), ("a.md", "b.md")],
    )
    assert written == 2
    assert graph.neighbors(["a.md"]) == [("a.md", "b.md", True), ("a.md", "d.md", False)]
    # Replacing a.md's links keeps d.md -> a.md (it goes out of d.md, not a.md).
    assert graph.set_links(["a.md"], [("a.md", "c.md")]) == 1
    assert graph.neighbors(["a.md"]) == [("a.md", "c.md", True), ("a.md", "d.md", False)]
    assert graph.set_links(["a.md"], []) == 0
    assert graph.neighbors(["a.md"]) == [("a.md", "d.md", False)]


def test_vector_search_order_and_cosines_are_numpys_exactly(graph: GraphClient) -> None:
    n = 300
    vectors = unit_vectors(n, seed=5)
    paths = [f"notes/{i:04d}.md" for i in range(n)]
    graph.upsert_notes([note(paths[i], vectors[i]) for i in range(n)])
    rng = np.random.default_rng(11)
    for _ in range(5):
        query = rng.standard_normal(DIMS)
        hits = graph.vector_search(query, 10)
        stored = vectors.astype(np.float64)
        exact = stored @ query / (np.linalg.norm(stored, axis=1) * np.linalg.norm(query))
        order = sorted(range(n), key=lambda i: (-exact[i], paths[i]))[:10]
        assert [h.path for h in hits] == [paths[i] for i in order]
        np.testing.assert_allclose([h.cosine for h in hits], exact[order], rtol=0, atol=1e-12)


def test_equal_cosines_are_ordered_by_path(graph: GraphClient) -> None:
    [v, other] = unit_vectors(2, seed=9)
    graph.upsert_notes([note(p, v) for p in ("c.md", "a.md", "b.md")] + [note("z.md", other)])
    hits = graph.vector_search(v, 3)
    assert [h.path for h in hits] == ["a.md", "b.md", "c.md"]


def test_a_query_vector_of_other_dims_is_refused(graph: GraphClient) -> None:
    graph.upsert_notes([note("a.md", unit_vectors(1)[0])])
    with pytest.raises(GraphQueryError, match=f"has {DIMS + 1} dimensions but .* has {DIMS}"):
        graph.vector_search(np.ones(DIMS + 1), 3)
    assert [h.path for h in graph.vector_search(unit_vectors(1)[0], 3)] == ["a.md"]


def test_index_dims_are_read_back_and_a_change_drops_other_dims(graph: GraphClient) -> None:
    assert graph.vector_index_dims() == DIMS
    graph.upsert_notes([note("big.md", unit_vectors(1)[0])])
    graph.ensure_schema(DIMS)  # same dims: nothing is touched
    assert list(graph.note_states()) == ["big.md"]
    try:
        graph.ensure_schema(8)
        assert graph.vector_index_dims() == 8
        assert graph.note_states() == {}  # 384-d notes must be re-embedded
        small = unit_vectors(2, dims=8, seed=4)
        graph.upsert_notes([note("s0.md", small[0]), note("s1.md", small[1])])
        assert graph.vector_search(small[1], 1)[0].path == "s1.md"
    finally:
        graph.ensure_schema(DIMS)
    assert graph.vector_index_dims() == DIMS
    assert graph.note_states() == {}


INJECTION_PATHS = [
    'notes/it\'s "quoted".md',
    "notes/x'}) MATCH (n) DETACH DELETE n //.md",
    "notes/$rows `backtick` {{dims}} \\ ;.md",
    "notes/ünïcödé — Ő ű.md",
]


def test_paths_with_quotes_and_cypher_fragments_round_trip_as_data(graph: GraphClient) -> None:
    vectors = unit_vectors(len(INJECTION_PATHS) + 1, seed=3)
    graph.upsert_notes([note("keep.md", vectors[-1])])
    graph.upsert_notes([note(p, vectors[i]) for i, p in enumerate(INJECTION_PATHS)])
    assert sorted(graph.note_states()) == sorted([*INJECTION_PATHS, "keep.md"])
    for i, path in enumerate(INJECTION_PATHS):
        assert graph.vector_search(vectors[i], 1)[0].path == path
    assert graph.set_links([INJECTION_PATHS[1]], [(INJECTION_PATHS[1], INJECTION_PATHS[2])]) == 1
    assert graph.neighbors([INJECTION_PATHS[2]]) == [
        (INJECTION_PATHS[2], INJECTION_PATHS[1], False)
    ]
    graph.delete_notes([INJECTION_PATHS[1]])
    assert sorted(graph.note_states()) == sorted(
        [p for p in INJECTION_PATHS if p != INJECTION_PATHS[1]] + ["keep.md"]
    )


# --- long notes: passages ----------------------------------------------------------------
def test_a_long_note_is_found_by_its_best_passage_and_read_back_whole(graph: GraphClient) -> None:
    vectors = unit_vectors(6, seed=21)
    passages = (tuple(vectors[4].tolist()), tuple(vectors[5].tolist()))
    graph.upsert_notes(
        [note("short.md", vectors[0]), note("long.md", vectors[1], passages=passages)]
        + [note(f"other{i}.md", vectors[i]) for i in (2, 3)]
    )
    # Found by its second passage alone, with that passage's exact cosine less the
    # discount, once.
    hits = graph.vector_search(vectors[5], 4)
    assert hits[0].path == "long.md"
    assert hits[0].cosine == pytest.approx(1.0 - PASSAGE_DISCOUNT, abs=1e-6)
    assert len({h.path for h in hits}) == len(hits) == 4
    sets = graph.note_vector_sets(["long.md", "short.md"])
    np.testing.assert_allclose(sets["long.md"], vectors[[1, 4, 5]], atol=1e-6)
    assert len(sets["short.md"]) == 1
    states, matrix = graph.all_vectors()
    assert [s.path for s in states].count("long.md") == 3 and len(matrix) == 6


def test_a_rewritten_or_deleted_note_leaves_no_passage_behind(graph: GraphClient) -> None:
    vectors = unit_vectors(4, seed=22)
    graph.upsert_notes([note("long.md", vectors[0], passages=(tuple(vectors[1].tolist()),))])
    graph.upsert_notes([note("other.md", vectors[2])])
    graph.upsert_notes([note("long.md", vectors[0])])  # became short
    assert len(graph.note_vector_sets(["long.md"])["long.md"]) == 1
    assert graph.vector_search(vectors[1], 2)[0].cosine < 0.99
    graph.upsert_notes([note("long.md", vectors[0], passages=(tuple(vectors[3].tolist()),))])
    graph.delete_notes(["long.md"])
    states, matrix = graph.all_vectors()
    assert [s.path for s in states] == ["other.md"] and len(matrix) == 1
    assert [h.path for h in graph.vector_search(vectors[3], 3)] == ["other.md"]


def test_passages_whose_note_is_gone_are_never_read_and_are_deleted(graph: GraphClient) -> None:
    vectors = unit_vectors(3, seed=23)
    graph.upsert_notes([note("kept.md", vectors[0], passages=(tuple(vectors[1].tolist()),))])
    stray = {"path": "gone.md", "idx": 1, "dims": DIMS, "embedding": vectors[2].tolist()}
    graph.transaction([("create_passages", {"rows": [stray]})])  # as an older writer leaves it
    assert [h.path for h in graph.vector_search(vectors[2], 3)] == ["kept.md"]
    assert [s.path for s in graph.all_vectors()[0]] == ["kept.md", "kept.md"]
    assert graph.delete_orphan_passages() == 1
    assert graph.delete_orphan_passages() == 0
    assert len(graph.note_vector_sets(["kept.md"])["kept.md"]) == 2


def test_a_note_with_many_near_passages_does_not_crowd_out_another(graph: GraphClient) -> None:
    rng = np.random.default_rng(24)
    query = unit_vectors(1, seed=25)[0]

    def near(scale: float) -> tuple[float, ...]:
        v = query + scale * rng.standard_normal(DIMS)
        return tuple((v / np.linalg.norm(v)).tolist())

    far = unit_vectors(2, seed=26)
    crowd = tuple(near(0.02) for _ in range(45))  # 45 passages nearer than other.md's
    graph.upsert_notes(
        [
            note("crowd.md", far[0], passages=crowd),
            note("other.md", far[1], passages=(near(0.2),)),
        ]
    )
    hits = graph.vector_search(query, 2)  # the index keeps one passage a note
    assert [h.path for h in hits] == ["crowd.md", "other.md"]
    other = graph.note_vector_sets(["other.md"])["other.md"][1]
    expected = float(np.dot(query, other) / np.linalg.norm(other)) - PASSAGE_DISCOUNT
    assert hits[1].cosine == pytest.approx(expected, abs=1e-6)


def test_a_second_generation_node_is_refused(graph: GraphClient) -> None:
    # Without the constraint, two first writes at once could each MERGE their own node and
    # the generation would read as either one's.
    vectors = unit_vectors(1)
    graph.upsert_notes([note("a.md", vectors[0])])

    def copy() -> None:
        with graph._session() as session:
            session.run("CREATE (:VaultGeneration {name: 'notes', value: 0})").consume()

    with pytest.raises(GraphQueryError):
        graph.call(copy)
    assert graph.generation() >= 1
