"""What every graph backend does, and the small protocol of the client it runs on.

A backend holds what differs per server (``memgraph.py``, ``neo4j.py``, ``arcadedb.py``,
which mirror each other): its Cypher folder and the queries it uses, schema and index
statements, how it reports the index dimensions, its dimension cap and score scale, and how
its version is read and checked. The operations every backend shares (notes, links, vector
search with exact re-scoring, the index lifecycle) are written once here against ``Runner``,
which the GraphClient implements: named queries and calls through the one retry policy, the
breaker and the exception translation. Backends never import the client (no import circle).

A backend instance belongs to one client: it caches the index dimensions it has read and
whether the server's version was checked.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np

from pipeline.errors import GraphQueryError
from pipeline.graph import records
from pipeline.graph.records import GraphHit, GraphNote, GraphTarget, NoteState, VectorSet
from pipeline.graph.scoring import ScoreScale, as_query_vector, exact_rescore

T = TypeVar("T")
Rows = list[dict[str, Any]]

#: How many of the over-fetched candidates come back with embeddings for exact re-scoring:
#: max(2k, k + RESCORE_MARGIN). Shipping embeddings dominates search latency, while the
#: index score of each returned candidate is already exact (to float rounding), so the top
#: of the over-fetch by index score holds the true top k; the margin absorbs float rounding
#: and indexes whose scores are approximate (quantised). Figures in
#: docs/benchmarks-history.md.
RESCORE_MARGIN = 20

#: How often a client that found no passage index looks for it again (seconds).
PASSAGE_INDEX_RECHECK_S = 60.0

#: The step every write of embeddings ends its transaction with (``bump_generation``).
BUMP: tuple[str, Mapping[str, Any]] = ("bump_generation", {})

#: The queries the shared operations below run; every backend's folder has them.
DATA_QUERIES = frozenset(
    {
        "ping",
        "bump_generation",
        "note_generation",
        "delete_other_dims",
        "upsert_notes",
        "delete_notes",
        "clear_links",
        "link_notes",
        "note_states",
        "all_vectors",
        "note_vectors",
        "vector_search",
        "neighbors",
        "delete_passages",
        "create_passages",
        "delete_other_dims_passages",
        "all_passages",
        "passage_vectors",
        "passage_search",
        "orphan_passages",
    }
)

#: The two vector indexes: one over the notes' own embeddings (what the model reads of the
#: whole text) and one over the passages of long notes.
NOTE_INDEX = "note"
PASSAGE_INDEX = "passage"
INDEXES = (NOTE_INDEX, PASSAGE_INDEX)
#: The DDL files of each index, for the backends that create indexes in Cypher.
_DDL = {
    NOTE_INDEX: ("create_vector_index", "drop_vector_index"),
    PASSAGE_INDEX: ("create_passage_index", "drop_passage_index"),
}
#: The DDL every backend with Cypher index statements adds to DATA_QUERIES.
INDEX_DDL = frozenset(name for pair in _DDL.values() for name in pair)

_VERSION = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?")


class Runner(Protocol):
    """The client as a backend sees it (GraphClient implements this)."""

    @property
    def target(self) -> GraphTarget: ...

    def password(self) -> str | None: ...

    def auto(
        self,
        name: str,
        params: Mapping[str, Any] | None = None,
        inline: Mapping[str, int] | None = None,
    ) -> Rows:
        """Run one named query of this backend in auto-commit mode; its last rows."""
        ...

    def transaction(self, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Rows]:
        """Run named queries in one explicit transaction; each one's last rows."""
        ...

    def reads(self, steps: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Rows]:
        """Run named read queries in auto-commit mode, in one session and one call."""
        ...

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (e.g. an HTTP command) through the retries, breaker and translation."""
        ...


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``"3.10.1"``, ``"v5.11.0"``, ``"2025.01.0"`` → (3, 10, 1) …; None when no number."""
    match = _VERSION.search(text or "")
    if match is None:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def rescore_limit(k: int) -> int:
    """How many candidates are re-scored exactly for a top-``k`` search."""
    return max(2 * k, k + RESCORE_MARGIN)


class Backend:
    """One graph server's dialect. Subclasses set the class attributes and the hooks."""

    #: The dialect name (``pipeline.graph.dialects``) and the folder of its Cypher files.
    name: ClassVar[str]
    #: How the server names itself in messages.
    product: ClassVar[str]
    #: Every query file this backend runs (the loader test checks its folder holds exactly
    #: these, and the client refuses any other name).
    queries: ClassVar[frozenset[str]]
    #: The widest vector index the server accepts.
    max_dims: ClassVar[int]
    score_scale: ClassVar[ScoreScale]
    #: The oldest server version vault-ko runs on, and why.
    min_version: ClassVar[tuple[int, ...]]
    min_version_reason: ClassVar[str]

    def __init__(self) -> None:
        self.version: str | None = None  # the server's version, once checked
        self._index_dims: int | None = None  # last read; None: unknown or no index
        self._passage_dims: int | None = None  # the passage index's, read with it
        self._index_read = False
        self._indexes_read_at = 0.0  # time.monotonic() of the last read

    # -- hooks: what differs per server --------------------------------------------------
    def server_version(self, runner: Runner, agent: str | None) -> str:
        """The server's own version string (a query, or its agent)."""
        raise NotImplementedError

    def create_schema(self, runner: Runner) -> None:
        """The unique path constraint (and whatever else the server needs); idempotent."""
        runner.auto("ensure_schema")

    def read_indexes(self, runner: Runner) -> dict[str, int]:
        """The dimensions of the vector indexes that exist (``NOTE_INDEX``,
        ``PASSAGE_INDEX``), as the server reports them, in one round trip."""
        raise NotImplementedError

    def drop_index(self, runner: Runner, which: str) -> None:
        runner.auto(_DDL[which][1])

    def create_index(self, runner: Runner, which: str, dims: int) -> None:
        runner.auto(_DDL[which][0], inline={"dims": dims})

    # -- the version guard ---------------------------------------------------------------
    def check_server(self, runner: Runner, agent: str | None) -> None:
        """Refuse a server older than ``min_version`` (GraphQueryError, one clear line)."""
        text = self.server_version(runner, agent)
        version = parse_version(text)
        wanted = ".".join(map(str, self.min_version))
        if version is None:
            raise GraphQueryError(
                f"cannot read the {self.product} version of the graph at "
                f"{runner.target.shown_url} (it says {text!r}); vault-ko needs {self.product} "
                f"{wanted} or newer"
            )
        if version < self.min_version:
            raise GraphQueryError(
                f"the graph at {runner.target.shown_url} runs {self.product} {text}; "
                f"vault-ko needs {self.product} {wanted} or newer ({self.min_version_reason})"
            )
        self.version = text

    # -- the vector index ----------------------------------------------------------------
    def vector_index_dims(self, runner: Runner) -> int | None:
        """The note index dimensions, read from the server now (and remembered, with the
        passage index's)."""
        found = self.read_indexes(runner)
        self._index_dims = found.get(NOTE_INDEX)
        self._passage_dims = found.get(PASSAGE_INDEX)
        self._index_read = True
        self._indexes_read_at = time.monotonic()
        return self._index_dims

    def ensure_schema(self, runner: Runner, dims: int) -> None:
        """Schema, then the vector indexes for ``dims`` (see ``ensure_vector_index``)."""
        self.create_schema(runner)
        self.ensure_vector_index(runner, dims)

    def ensure_vector_index(self, runner: Runner, dims: int) -> None:
        """Make both vector indexes have ``dims`` dimensions, and prove they do.

        Missing: created. Other dimensions: the notes (and passages) embedded with other
        dimensions are deleted first (the embed sync embeds them again), then the index is
        dropped and created. The deletion comes before the drop on every backend because
        Memgraph's drop moves every indexed vector back into the property store. The
        dimensions are read back after creating: Memgraph answers a failed create with a
        notification, not an error. Each index is handled on its own, so a graph written
        before passages existed keeps its note index and only gains the passage index.
        """
        if dims > self.max_dims:
            raise GraphQueryError(
                f"{self.product} vector indexes hold at most {self.max_dims:,} dimensions; "
                f"the embedding model has {dims:,}"
            )
        self.vector_index_dims(runner)
        current = {NOTE_INDEX: self._index_dims, PASSAGE_INDEX: self._passage_dims}
        if all(value == dims for value in current.values()):
            return
        steps: list[tuple[str, Mapping[str, Any]]] = []
        if current[NOTE_INDEX] != dims:
            steps.append(("delete_other_dims", {"dims": dims}))
        steps.append(("delete_other_dims_passages", {"dims": dims}))
        runner.transaction([*steps, BUMP])
        for which in INDEXES:
            if current[which] == dims:
                continue
            if current[which] is not None:
                self.drop_index(runner, which)
            self.create_index(runner, which, dims)
        self.vector_index_dims(runner)
        created = {NOTE_INDEX: self._index_dims, PASSAGE_INDEX: self._passage_dims}
        for which, value in created.items():
            if value != dims:
                found = "no vector index" if value is None else f"{value} dimensions"
                raise GraphQueryError(
                    f"the graph at {runner.target.shown_url} did not create the {which} vector "
                    f"index with {dims} dimensions (it reports {found}); see the "
                    f"{self.product} server log"
                )

    # -- notes and links -----------------------------------------------------------------
    def ping(self, runner: Runner) -> None:
        runner.auto("ping")

    def generation(self, runner: Runner) -> int:
        """How many changes the note vectors have had (0 before the first)."""
        rows = runner.auto("note_generation")
        value = rows[0].get("generation") if rows else None
        return int(value) if value is not None else 0

    def note_states(self, runner: Runner) -> dict[str, NoteState]:
        rows = runner.auto("note_states")
        return {state.path: state for state in map(records.note_state, rows)}

    def upsert_notes(self, runner: Runner, notes: Sequence[GraphNote]) -> None:
        if not notes:
            return
        runner.transaction([*_note_steps(notes), BUMP])

    def delete_notes(self, runner: Runner, paths: Sequence[str]) -> None:
        unique = sorted(set(paths))
        if unique:
            steps = [("delete_notes", {"paths": unique}), ("delete_passages", {"paths": unique})]
            runner.transaction([*steps, BUMP])

    def set_links(
        self, runner: Runner, source_paths: Sequence[str], pairs: Sequence[tuple[str, str]]
    ) -> int:
        link_rows = records.link_pairs(pairs)
        sources = sorted(set(source_paths) | {row["src"] for row in link_rows})
        if not sources:
            return 0
        steps: list[tuple[str, Mapping[str, Any]]] = [("clear_links", {"paths": sources})]
        if link_rows:
            steps.append(("link_notes", {"pairs": link_rows}))
        results = runner.transaction(steps)
        if not link_rows:
            return 0
        last = results[-1]
        return int(last[0]["written"]) if last else 0

    def upsert_notes_with_links(
        self,
        runner: Runner,
        notes: Sequence[GraphNote],
        source_paths: Sequence[str],
        pairs: Sequence[tuple[str, str]],
    ) -> int:
        """``upsert_notes`` then ``set_links`` in ONE transaction: a run killed at any point
        never leaves notes in the graph without their outgoing edges (the next run sees them
        unchanged and would not write those edges again)."""
        link_rows = records.link_pairs(pairs)
        sources = sorted(set(source_paths) | {row["src"] for row in link_rows})
        steps = _note_steps(notes)
        if sources:
            steps.append(("clear_links", {"paths": sources}))
        link_step = len(steps)
        if link_rows:
            steps.append(("link_notes", {"pairs": link_rows}))
        if not steps:
            return 0
        if notes:
            steps.append(BUMP)  # the warm service reloads the vectors this write changed
        results = runner.transaction(steps)
        if not link_rows:
            return 0
        written = results[link_step]
        return int(written[0]["written"]) if written else 0

    def delete_orphan_passages(self, runner: Runner) -> int:
        """Delete the passages whose note is gone; how many notes' passages went."""
        paths = [str(r["path"]) for r in runner.auto("orphan_passages") if r.get("path")]
        if paths:
            runner.transaction([("delete_passages", {"paths": paths}), BUMP])
        return len(paths)

    def neighbors(self, runner: Runner, paths: Sequence[str]) -> list[tuple[str, str, bool]]:
        unique = sorted(set(paths))
        if not unique:
            return []
        rows = runner.auto("neighbors", {"paths": unique})
        return [(str(r["path"]), str(r["neighbor"]), bool(r["outgoing"])) for r in rows]

    # -- search --------------------------------------------------------------------------
    def vector_search(
        self, runner: Runner, vector: np.ndarray, k: int, candidates: int
    ) -> list[GraphHit]:
        """The ``k`` notes nearest to ``vector`` by exact cosine, desc, ties by path.

        The query vector must have the index's dimensions: it is refused before it is sent
        (Memgraph would answer another length silently, memgraph#4476). The index is asked
        for ``max(k, candidates)`` neighbours (the over-fetch that buys recall), the best
        ``rescore_limit(k)`` come back with their stored embeddings and are re-scored with
        numpy. A candidate deleted by a concurrent sync (Memgraph's index reads
        uncommitted) comes back without a path and is skipped.
        """
        if k <= 0:
            return []
        try:
            query = as_query_vector(vector)
        except ValueError as exc:
            raise GraphQueryError(f"invalid query vector: {exc}") from exc
        self._check_query_dims(runner, query.size)
        fetch = max(int(k), int(candidates))
        params = {
            "k": fetch,
            "limit": min(fetch, rescore_limit(int(k))),
            "vector": query.astype(np.float32).astype(float).tolist(),
        }
        if self._passage_dims == query.size:
            # A long note scores the better of its own vector and its best passage, less
            # the passage discount (``scoring.PASSAGE_DISCOUNT``): both indexes are asked,
            # in one call.
            rows, passages = runner.reads([("vector_search", params), ("passage_search", params)])
        else:
            rows, passages = runner.auto("vector_search", params), []
        found = [records.candidate(row) for row in rows if row.get("path") is not None]
        found += [records.candidate(r, passage=True) for r in passages if r.get("path") is not None]
        return exact_rescore(query, found, int(k), self.score_scale)

    def _check_query_dims(self, runner: Runner, size: int) -> None:
        fresh = not self._index_read or (
            # A graph embedded before passages existed gains their index at its next sync,
            # perhaps by another process: a long-lived client looks again now and then.
            self._passage_dims is None
            and time.monotonic() - self._indexes_read_at > PASSAGE_INDEX_RECHECK_S
        )
        dims = self.vector_index_dims(runner) if fresh else self._index_dims
        if dims != size and not fresh:
            dims = self.vector_index_dims(runner)  # rebuilt since we read it? ask again
        if dims is None:
            raise GraphQueryError(
                f"the graph at {runner.target.shown_url} has no note vector index yet; "
                "run `vault-ko sync` (or `vault-ko embed`)"
            )
        if dims != size:
            raise GraphQueryError(
                f"the query vector has {size} dimensions but the graph's note vector index "
                f"has {dims}: the vault was embedded with another model; run `vault-ko sync` "
                "to re-embed it, or set embed_model to the model it was embedded with"
            )

    def note_vector_sets(self, runner: Runner, paths: Sequence[str]) -> dict[str, VectorSet]:
        unique = sorted(set(paths))
        rows, found = runner.reads(
            [("note_vectors", {"paths": unique}), ("passage_vectors", {"paths": unique})]
        )
        passages = _passages_by_path(found)
        return {
            path: (embedding, *passages.get(path, ()))
            for row in rows
            if row.get("path") is not None
            and (embedding := records.embedding_of(row))
            and (path := str(row["path"]))
        }

    def all_vectors(self, runner: Runner) -> tuple[list[NoteState], np.ndarray]:
        rows, found = runner.reads([("all_vectors", {}), ("all_passages", {})])
        passages = _passages_by_path(found)
        states: list[NoteState] = []
        vectors: list[tuple[float, ...]] = []
        for row in rows:
            embedding = records.embedding_of(row)
            if not embedding:
                continue
            state = records.note_state(row)
            # A long note's rows follow each other: its own embedding, then its passages.
            for vector in (embedding, *passages.get(state.path, ())):
                states.append(state)
                vectors.append(vector)
        if not vectors:
            return [], np.zeros((0, 0), dtype=np.float32)
        lengths = {len(v) for v in vectors}
        if len(lengths) > 1:
            raise GraphQueryError(
                f"the graph holds embeddings of several sizes {sorted(lengths)}; "
                "run `vault-ko embed` to re-embed the vault with one model"
            )
        return states, np.asarray(vectors, dtype=np.float32)


def _note_steps(notes: Sequence[GraphNote]) -> list[tuple[str, Mapping[str, Any]]]:
    """The steps that write ``notes``: the nodes, then their passages replaced (a note that
    became short loses the ones it had)."""
    if not notes:
        return []
    try:
        payload = [note.as_row() for note in notes]
        passages = [row for note in notes for row in note.passage_rows()]
    except ValueError as exc:
        raise GraphQueryError(str(exc)) from exc
    steps: list[tuple[str, Mapping[str, Any]]] = [
        ("upsert_notes", {"rows": payload}),
        ("delete_passages", {"paths": sorted({note.path for note in notes})}),
    ]
    if passages:
        steps.append(("create_passages", {"rows": passages}))
    return steps


def _passages_by_path(rows: Rows) -> dict[str, list[tuple[float, ...]]]:
    """all_passages / passage_vectors rows → path → its passage vectors, in passage order."""
    out: dict[str, list[tuple[float, ...]]] = {}
    for row in rows:
        embedding = records.embedding_of(row)
        if row.get("path") is not None and embedding:
            out.setdefault(str(row["path"]), []).append(embedding)
    return out
