"""Mutation check of the Cypher tests: break one .cypher file at a time, run the unit tests
of the graph layer, and report whether a test failed ("killed") or all passed ("survived").

    .venv/bin/python scripts/cypher_mutations.py

Run it by hand after changing Cypher or its tests; every mutation should be killed. It
edits the files of cypher/ in place (that is what the editable install reads) and restores
each one, so it refuses to start when cypher/ has uncommitted changes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = ["tests/unit/graph"]

#: (file under cypher/, text to replace, replacement, what the mutation breaks)
MUTATIONS = [
    (
        "memgraph/vector_search.cypher",
        "vector_search.search(",
        "vector_search.query(",
        "rename Memgraph's search procedure",
    ),
    (
        "memgraph/vector_search.cypher",
        "ORDER BY score ASC",
        "ORDER BY score DESC",
        "flip Memgraph's ORDER BY (distance: lower is nearer)",
    ),
    (
        "memgraph/vector_search.cypher",
        "YIELD node, distance\nWITH id(node) AS candidate, distance",
        "YIELD node, similarity\nWITH id(node) AS candidate, similarity AS distance",
        "use Memgraph's sign-losing similarity column",
    ),
    (
        "memgraph/vector_search.cypher",
        "MATCH (n:Note) WHERE id(n) = candidate",
        "OPTIONAL MATCH (n:Note) WHERE id(n) = candidate",
        "keep candidates that are no longer visible (uncommitted index)",
    ),
    (
        "memgraph/create_vector_index.cypher",
        '"capacity": 10000, "metric": "cos"}',
        '"capacity": 10000, "metric": "l2sq"}',
        "change Memgraph's index metric (breaks the score scale)",
    ),
    (
        "neo4j/vector_index_info.cypher",
        "SHOW VECTOR INDEXES",
        "SHOW INDEXES",
        "Neo4j SHOW VECTOR INDEXES → SHOW INDEXES",
    ),
    (
        "neo4j/vector_index_info.cypher",
        "options.indexConfig['vector.dimensions']",
        "options.indexConfig['vector.dimension']",
        "Neo4j: read a config key that does not exist",
    ),
    (
        "neo4j/vector_index_info.cypher",
        "WHERE name = 'note_embedding'",
        "WHERE name = 'note_embeddings'",
        "Neo4j: filter SHOW VECTOR INDEXES on another index name",
    ),
    (
        "neo4j/vector_search.cypher",
        "ORDER BY score DESC",
        "ORDER BY score ASC",
        "flip Neo4j's ORDER BY ((1 + cos) / 2: higher is nearer)",
    ),
    (
        "neo4j/vector_search.cypher",
        "('note_embedding', $k, $vector)",
        "('note_embedding', $vector, $k)",
        "swap Neo4j's queryNodes arguments",
    ),
    (
        "neo4j/await_vector_index.cypher",
        "db.awaitIndex(",
        "db.awaitIndexes(",
        "rename Neo4j's awaitIndex procedure",
    ),
    (
        "arcadedb/vector_search.cypher",
        "'Note[embedding]'",
        "'Note_embedding'",
        "ArcadeDB: query an index name it does not have",
    ),
]


def run_tests() -> bool:
    """True when the unit tests pass."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TESTS],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    return done.returncode == 0


def main() -> int:
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "cypher"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    if dirty:
        print(f"cypher/ has uncommitted changes; commit or stash them first:\n{dirty}")
        return 2
    if not run_tests():
        print("the tests fail before any mutation; fix them first")
        return 2
    rows = []
    for name, old, new, what in MUTATIONS:
        path = REPO / "cypher" / name
        original = path.read_text(encoding="utf-8")
        if original.count(old) != 1:
            print(f"{name}: {old!r} must occur exactly once (found {original.count(old)})")
            return 2
        started = time.perf_counter()
        try:
            path.write_text(original.replace(old, new), encoding="utf-8")
            killed = not run_tests()
        finally:
            path.write_text(original, encoding="utf-8")
        rows.append((name, what, "killed" if killed else "SURVIVED", time.perf_counter() - started))
    print("| file | mutation | result |")
    print("|---|---|---|")
    for name, what, result, _seconds in rows:
        print(f"| {name} | {what} | {result} |")
    survived = sum(result == "SURVIVED" for _, _, result, _ in rows)
    print(f"\nRESULT mutations={len(rows)} killed={len(rows) - survived} survived={survived}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
