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

# "Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)" is ArcadeDB, so test it before Neo4j.
_ARCADEDB_AGENT = re.compile(r"\bArcadeDB\b", re.IGNORECASE)
_MEMGRAPH_AGENT = re.compile(r"^\s*Memgraph\b", re.IGNORECASE)
_NEO4J_AGENT = re.compile(r"^\s*Neo4j\b", re.IGNORECASE)


def detect_dialect(agent: str | None, override: str | None = None) -> str:
    """The dialect of a server from its Bolt agent string, unless ``override`` names one.

    Raises ConfigError for an unknown override or an agent we do not recognise (set
    ``graph_dialect`` to talk to a compatible server anyway).
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
        f"cannot tell the graph dialect from the server agent {agent!r}; "
        f"set VAULT_KO_GRAPH_DIALECT to one of {', '.join(DIALECTS)}"
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
