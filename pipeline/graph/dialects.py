"""Graph dialects: detection from the Bolt agent string, and each index's score scale.

Every backend reports vector similarity on its own scale, so nothing downstream may compare
raw index scores. The pipeline works on raw cosine: the client re-scores candidates exactly
from their stored embeddings (``scoring.py``); ``score_to_cosine`` is only used for a row
whose stored embedding is unusable.

=========  =====================================  ==========================  ==============
dialect    index call                             score column                cosine
=========  =====================================  ==========================  ==============
neo4j      db.index.vector.queryNodes             (1 + cos) / 2               2·score − 1
arcadedb   db.index.vector.queryNodes (26.10)     (1 + cos) / 2               2·score − 1
memgraph   vector_search.search, metric "cos"     distance = 1 − cos          1 − score
=========  =====================================  ==========================  ==============

Memgraph also yields ``similarity`` = |cos|, which loses the sign; we never use it.
"""

from __future__ import annotations

import math
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


def score_to_cosine(dialect: str, score: float) -> float:
    """Convert one index score of ``dialect`` to a cosine in [-1, 1] (see the module table)."""
    if not math.isfinite(score):
        return float("nan")
    if dialect in (NEO4J, ARCADEDB):
        cosine = 2.0 * score - 1.0
    elif dialect == MEMGRAPH:
        cosine = 1.0 - score
    else:
        raise ConfigError(f"unknown graph dialect {dialect!r}")
    return max(-1.0, min(1.0, cosine))


def cosine_to_score(dialect: str, cosine: float) -> float:
    """The inverse of ``score_to_cosine`` (documentation and tests of the scales)."""
    if dialect in (NEO4J, ARCADEDB):
        return (1.0 + cosine) / 2.0
    if dialect == MEMGRAPH:
        return 1.0 - cosine
    raise ConfigError(f"unknown graph dialect {dialect!r}")
