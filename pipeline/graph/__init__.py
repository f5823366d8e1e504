"""The graph stage: notes and their embeddings in a Bolt graph (Memgraph, Neo4j, ArcadeDB).

client.py         GraphClient: transport, the one retry policy, the breaker, exception translation
backends/         one class per server (Memgraph, Neo4j, ArcadeDB): what differs, and the
                  operations they share, run through the client
breaker.py        the circuit breaker shared by processes through the state dir
cypher.py         the loader of cypher/<dialect>/<name>.cypher (installed as package data)
dialects.py       dialect names and their detection from the Bolt agent
scoring.py        score scales, and exact re-scoring of index candidates (raw cosine)
records.py        the dataclasses handed out, and row parsing
arcadedb_http.py  ArcadeDB's SQL-only schema commands over its HTTP API
local_state.py    the local server's record and password (read by the client and local.py)
local.py          the local ArcadeDB server managed per state dir (`vault-ko graph up`)

The names below are imported on first use: importing any submodule runs this file, and the
client pulls in numpy and tenacity, which every `vault-ko` start (the CLI registers `graph`)
and the records-only importers would otherwise pay for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports on first use
    from pipeline.graph.breaker import Breaker as Breaker
    from pipeline.graph.client import GraphClient as GraphClient
    from pipeline.graph.dialects import ARCADEDB as ARCADEDB
    from pipeline.graph.dialects import DIALECTS as DIALECTS
    from pipeline.graph.dialects import MEMGRAPH as MEMGRAPH
    from pipeline.graph.dialects import NEO4J as NEO4J
    from pipeline.graph.local import LocalGraph as LocalGraph
    from pipeline.graph.records import GraphHit as GraphHit
    from pipeline.graph.records import GraphNote as GraphNote
    from pipeline.graph.records import GraphStatus as GraphStatus
    from pipeline.graph.records import NoteState as NoteState

_HOME = {
    "ARCADEDB": "dialects",
    "DIALECTS": "dialects",
    "MEMGRAPH": "dialects",
    "NEO4J": "dialects",
    "Breaker": "breaker",
    "GraphClient": "client",
    "GraphHit": "records",
    "GraphNote": "records",
    "GraphStatus": "records",
    "LocalGraph": "local",
    "NoteState": "records",
}

__all__ = list(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value
