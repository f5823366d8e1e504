"""The graph stage: notes and their embeddings in a Bolt graph (Memgraph, Neo4j, ArcadeDB).

client.py         GraphClient: the one retry policy, the breaker, exception translation
breaker.py        the circuit breaker shared by processes through the state dir
cypher.py         the loader of cypher/<dialect>/<name>.cypher
dialects.py       dialect detection and each index's score scale
scoring.py        exact re-scoring of index candidates (raw cosine, ties by path)
records.py        the dataclasses handed out, and row parsing
arcadedb_http.py  ArcadeDB's SQL-only schema commands over its HTTP API
local.py          the local ArcadeDB server managed per state dir (`vault-ko graph up`)
"""

from __future__ import annotations

from pipeline.graph.breaker import Breaker
from pipeline.graph.client import GraphClient, ensure_vector_index, open_graph
from pipeline.graph.dialects import ARCADEDB, DIALECTS, MEMGRAPH, NEO4J
from pipeline.graph.local import LocalGraph
from pipeline.graph.records import GraphHit, GraphNote, GraphStatus, NoteState

__all__ = [
    "ARCADEDB",
    "DIALECTS",
    "MEMGRAPH",
    "NEO4J",
    "Breaker",
    "GraphClient",
    "GraphHit",
    "GraphNote",
    "GraphStatus",
    "LocalGraph",
    "NoteState",
    "ensure_vector_index",
    "open_graph",
]
