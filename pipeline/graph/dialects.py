"""Graph dialects: their names and their detection from the Bolt agent string.

Everything else that differs per server (Cypher folder, schema statements, index
dimensions, score scale, version check) lives in its backend class, ``backends/``.
"""

from __future__ import annotations

import re

from pipeline.errors import ConfigError

MEMGRAPH = "memgraph"
NEO4J = "neo4j"
ARCADEDB = "arcadedb"
DIALECTS = (MEMGRAPH, NEO4J, ARCADEDB)

# Real agent strings, in the order they are tested:
#   ArcadeDB 26.10   "Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)"
#   Memgraph ≥ 2.19  "Neo4j/v5.11.0 compatible graph database server - Memgraph" (its default
#                    --bolt-server-name-for-init; older or customised ones say "Memgraph/…")
#   Neo4j            "Neo4j/5.26.0", "Neo4j/2025.01.0"
# Both others announce themselves as Neo4j-compatible, so "Neo4j" is only trusted last, and
# the other names count anywhere in the string.
_ARCADEDB_AGENT = re.compile(r"\bArcadeDB\b", re.IGNORECASE)
_MEMGRAPH_AGENT = re.compile(r"\bMemgraph\b", re.IGNORECASE)
_NEO4J_AGENT = re.compile(r"^\s*Neo4j/", re.IGNORECASE)


def detect_dialect(agent: str | None, override: str | None = None) -> str:
    """The dialect of a server from its Bolt agent string, unless ``override`` names one.

    Raises ConfigError for an unknown override, or for an agent that names none of the
    servers we know (set ``graph_dialect`` to talk to a compatible server anyway).
    """
    if override:
        name = override.strip().lower()
        if name not in DIALECTS:
            raise ConfigError(
                f"unknown graph dialect {override!r}; expected one of {', '.join(DIALECTS)}"
            )
        return name
    text = agent or ""
    if _ARCADEDB_AGENT.search(text):
        return ARCADEDB
    if _MEMGRAPH_AGENT.search(text):
        return MEMGRAPH
    if _NEO4J_AGENT.search(text):
        return NEO4J
    raise ConfigError(
        f"the graph server's agent {agent!r} names no server vault-ko knows "
        f"(Memgraph, Neo4j, ArcadeDB); set graph_dialect (VAULT_KO_GRAPH_DIALECT, or "
        f"[graph] dialect in vault-ko.toml) to one of {', '.join(DIALECTS)}"
    )
