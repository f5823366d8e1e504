"""One backend class per graph dialect, mirroring each other (see ``base.py``).

memgraph.py   Memgraph ≥ 3.0: WITH CONFIG vector index, vector_search.search, SHOW VERSION
neo4j.py      Neo4j ≥ 5.15: OPTIONS {indexConfig}, db.index.vector.queryNodes, awaitIndex
arcadedb.py   ArcadeDB ≥ 26.10: schema as SQL over HTTP, search over Bolt
"""

from __future__ import annotations

from pipeline.errors import ConfigError
from pipeline.graph.backends.arcadedb import ArcadeDBBackend
from pipeline.graph.backends.base import Backend, Runner
from pipeline.graph.backends.memgraph import MemgraphBackend
from pipeline.graph.backends.neo4j import Neo4jBackend
from pipeline.graph.scoring import ScoreScale

BACKENDS: dict[str, type[Backend]] = {
    cls.name: cls for cls in (MemgraphBackend, Neo4jBackend, ArcadeDBBackend)
}

__all__ = ["BACKENDS", "Backend", "Runner", "backend_class", "backend_for", "score_scale"]


def backend_class(dialect: str) -> type[Backend]:
    """The backend class of ``dialect``; ConfigError for an unknown one."""
    try:
        return BACKENDS[dialect]
    except KeyError:
        raise ConfigError(
            f"unknown graph dialect {dialect!r}; expected one of {', '.join(BACKENDS)}"
        ) from None


def backend_for(dialect: str) -> Backend:
    """A fresh backend of ``dialect`` for one client."""
    return backend_class(dialect)()


def score_scale(dialect: str) -> ScoreScale:
    """How ``dialect``'s vector index reports similarity."""
    return backend_class(dialect).score_scale
