"""Memgraph 3.0 or newer (production).

Checked against Memgraph's documentation and its own tests (memgraph/memgraph
tests/gql_behave/.../vector_search.feature):

* ``CREATE VECTOR INDEX note_embedding ON :Note(embedding) WITH CONFIG {"dimension": d,
  "capacity": c, "metric": "cos"}``; a failed create is a notification, hence the re-read.
* ``CALL vector_search.search(index, k, vector) YIELD node, distance, similarity``: with
  metric "cos", distance = 1 − cos (lower is nearer) and similarity = |cos|, which loses
  the sign, so only distance is used.
* ``SHOW VECTOR INDEX INFO`` answers in its own columns (capacity, dimension, index_name,
  label, property, metric, size, scalar_kind, index_type): the row is picked here by name.
* The index reads uncommitted: vector_search.cypher matches each candidate back by id, so a
  node another transaction created or deleted is dropped, not returned half-read.
* ``SHOW VERSION`` gives Memgraph's own version (its Bolt agent carries Neo4j's).
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
from pipeline.graph.dialects import MEMGRAPH
from pipeline.graph.scoring import ScoreScale

#: The names the Cypher files give the note and passage vector indexes.
VECTOR_INDEX = "note_embedding"
PASSAGE_VECTOR_INDEX = "passage_embedding"
_NAMES = {VECTOR_INDEX: NOTE_INDEX, PASSAGE_VECTOR_INDEX: PASSAGE_INDEX}


class MemgraphBackend(Backend):
    name = MEMGRAPH
    product = "Memgraph"
    queries = DATA_QUERIES | INDEX_DDL | {"server_version", "ensure_schema", "vector_index_info"}
    #: Memgraph's vector index dimension is a 16-bit count.
    max_dims = 65_535
    score_scale = ScoreScale(slope=-1.0, intercept=1.0, formula="distance = 1 - cos")
    min_version = (3, 0)
    min_version_reason = "the stable vector index API: CREATE VECTOR INDEX, vector_search.search"

    def server_version(self, runner: Runner, agent: str | None) -> str:
        rows = runner.auto("server_version")
        # SHOW VERSION answers one row with one column; read it by position, not by name.
        return str(next(iter(rows[0].values()), "")) if rows else ""

    def read_indexes(self, runner: Runner) -> dict[str, int]:
        found: dict[str, int] = {}
        for row in runner.auto("vector_index_info"):
            which = _NAMES.get(str(row.get("index_name")))
            if which is not None and row.get("dimension") is not None:
                found[which] = int(row["dimension"])
        return found
