"""Neo4j 5.15 or newer (and 2025.x), checked against the Cypher manual's vector index page.

* ``CREATE VECTOR INDEX note_embedding IF NOT EXISTS FOR (n:Note) ON (n.embedding) OPTIONS
  {indexConfig: {`vector.dimensions`: d, `vector.similarity_function`: 'cosine'}}`` (5.15);
  the index is built in the background, so ``db.awaitIndex`` waits for it to be ONLINE.
* ``CALL db.index.vector.queryNodes(index, k, vector) YIELD node, score``: score =
  (1 + cos) / 2, higher is nearer.
* ``SHOW VECTOR INDEXES YIELD name, options WHERE …`` reads the dimensions from
  ``options.indexConfig``.
* ``CALL dbms.components()`` gives the kernel version (the agent only says "Neo4j/x").
"""

from __future__ import annotations

from pipeline.graph.backends.base import (
    DATA_QUERIES,
    INDEX_DDL,
    NOTE_INDEX,
    PASSAGE_INDEX,
    Backend,
    Runner,
)
from pipeline.graph.dialects import NEO4J
from pipeline.graph.scoring import ScoreScale

#: The names the Cypher files give the note and passage vector indexes.
_NAMES = {"note_embedding": NOTE_INDEX, "passage_embedding": PASSAGE_INDEX}

#: How long ``db.awaitIndex`` may wait for a new index to come online (its own default).
AWAIT_INDEX_SECONDS = 300


class Neo4jBackend(Backend):
    name = NEO4J
    product = "Neo4j"
    queries = (
        DATA_QUERIES
        | INDEX_DDL
        | {
            "server_version",
            "ensure_schema",
            "vector_index_info",
            "await_vector_index",
            "await_passage_index",
        }
    )
    #: `vector.dimensions` accepts 1..4096 (vector-2.0 provider; the Cypher manual).
    max_dims = 4_096
    score_scale = ScoreScale(slope=2.0, intercept=-1.0, formula="score = (1 + cos) / 2")
    min_version = (5, 15)
    min_version_reason = "CREATE VECTOR INDEX and SHOW VECTOR INDEXES"

    def server_version(self, runner: Runner, agent: str | None) -> str:
        rows = runner.auto("server_version")
        return str(rows[0]["version"]) if rows else ""

    def read_indexes(self, runner: Runner) -> dict[str, int]:
        found: dict[str, int] = {}
        for row in runner.auto("vector_index_info"):
            which = _NAMES.get(str(row.get("name")))
            if which is not None and row.get("dims") is not None:
                found[which] = int(row["dims"])
        return found

    def create_index(self, runner: Runner, which: str, dims: int) -> None:
        super().create_index(runner, which, dims)
        await_query = "await_vector_index" if which == NOTE_INDEX else "await_passage_index"
        runner.auto(await_query, {"seconds": AWAIT_INDEX_SECONDS})
