"""ArcadeDB 26.10 or newer: the local graph (arcadedb-embedded), data over Bolt, schema over HTTP.

ArcadeDB's Cypher cannot create types, unique indexes or vector indexes (it refuses
``CREATE VECTOR INDEX``), so its schema goes as SQL over its HTTP API
(``arcadedb_http.py``): vertex type Note, edge type LINKS_TO, Note.path STRING with a UNIQUE
index, Note.embedding ARRAY_OF_FLOATS, and the LSM_VECTOR index ``Note[embedding]`` with
COSINE similarity, whose dimensions are read from ``SELECT indexes FROM schema:types``.
Notes, links and search go over Bolt: ``db.index.vector.queryNodes('Note[embedding]', k,
vector)`` yields score = (1 + cos) / 2 (checked against the 26.10.2 server). Its version is
the one its agent names: "Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)".
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pipeline.errors import GraphQueryError
from pipeline.graph.arcadedb_http import ArcadeHttp
from pipeline.graph.backends.base import DATA_QUERIES, Backend, Runner
from pipeline.graph.dialects import ARCADEDB
from pipeline.graph.records import MAX_DIMS
from pipeline.graph.scoring import ScoreScale

#: ArcadeDB's HTTP API port when only its Bolt URL is known (its default).
HTTP_PORT = 2480
_AGENT_VERSION = re.compile(r"\bArcadeDB\s+v?(\d[\w.\-]*)", re.IGNORECASE)


class ArcadeDBBackend(Backend):
    name = ARCADEDB
    product = "ArcadeDB"
    queries = DATA_QUERIES
    max_dims = MAX_DIMS
    score_scale = ScoreScale(slope=2.0, intercept=-1.0, formula="score = (1 + cos) / 2")
    min_version = (26, 10)
    min_version_reason = "its Bolt vector search and LSM_VECTOR index as vault-ko uses them"

    def __init__(self) -> None:
        super().__init__()
        self._schema_ready = False

    def _http(self, runner: Runner) -> tuple[ArcadeHttp, str]:
        target = runner.target
        if not target.database:
            raise GraphQueryError(
                "ArcadeDB needs a database name: set VAULT_KO_GRAPH_DATABASE (graph.database)"
            )
        password = runner.password()
        if password is None:
            raise GraphQueryError("ArcadeDB schema commands need the graph password")
        url = target.http_url or f"http://{urlsplit(target.url).hostname}:{HTTP_PORT}"
        return ArcadeHttp(url, target.user, password), target.database

    def server_version(self, runner: Runner, agent: str | None) -> str:
        match = _AGENT_VERSION.search(agent or "")
        return match.group(1) if match else ""

    def create_schema(self, runner: Runner) -> None:
        # Once per client: ensure_schema and ensure_vector_index both need it, and repeating
        # the (idempotent) commands would only cost round trips.
        if self._schema_ready:
            return
        http, database = self._http(runner)

        def run() -> None:
            http.ensure_database(database)
            http.ensure_schema(database)

        runner.call(run)
        self._schema_ready = True

    def read_indexes(self, runner: Runner) -> dict[str, int]:
        http, database = self._http(runner)
        return runner.call(lambda: http.vector_indexes(database))

    def drop_index(self, runner: Runner, which: str) -> None:
        http, database = self._http(runner)
        runner.call(lambda: http.drop_vector_index(database, which))

    def create_index(self, runner: Runner, which: str, dims: int) -> None:
        http, database = self._http(runner)
        runner.call(lambda: http.create_vector_index(database, which, dims))
