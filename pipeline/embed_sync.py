"""Incremental embedding sync: make the graph's Note nodes match the KO-DB vault registry.

One run compares the registry (path, content_hash) with the graph's (path, content_hash,
model, dims) and then:

1. ``ensure_schema(embedder.dims)``: a model with other dimensions rebuilds the vector index,
   and every node then counts as stale because its stored dims differ;
2. deletes orphans (nodes whose note left the registry), with their edges;
3. embeds missing and stale notes (hash, model, dims or text rules differ; everything with
   ``full``), longest text first, in windows of ``WINDOW_BATCHES`` model batches of
   ``settings.embed_batch_size`` (fewer for a small run, ``window_size``); each window is
   one graph transaction (MERGE on path), written while the next window is embedded, so a
   run killed at any point leaves only whole windows behind and the next run picks up the
   rest without duplicates;
4. in the same transaction as each window's notes, writes the LINKS_TO edges of the notes it
   embedded, plus those of already-embedded notes whose wikilinks point at notes the window
   created (their edges could not exist before the target node did). A kill between a
   window's notes and its edges would leave notes the next run sees as unchanged and never
   links, so the two are one transaction. Link targets resolve to notes by path, title, alias
   or file stem, case-insensitively; unresolved targets are ignored.

5. a long note, with ``embed_long_notes = "passages"`` (the default), is embedded as
   passages too (``pipeline/vault/passages.py``): the note node keeps its own embedding
   (what the model reads of the whole text), and each passage is a Passage node written in
   the same transaction, after the note's old passages are deleted; a note the model reads
   whole is one vector either way. The setting
   is part of the text rules (``text_version``): changing it embeds the vault again.

A note that cannot be read now (bad YAML, binary, too big, gone) is skipped and reported with
its reason; it never aborts the run.

A note renamed or moved without a change to its text (an orphan and a new path with the same
content hash, model, dims and text rules, whose embedded text reads the same at both paths:
a title taken from the file name changes it) keeps its vector: the stored one is read
before the orphan is deleted and written under the new path, so only edited notes reach
the model (``EmbedReport.moved``).

The node's content_hash is the hash of the file as read now, so a note edited after the last
ingest is embedded again on every run until `vault-ko ingest` catches up (the registry and the
graph then agree). Edges of unchanged notes are only rewritten when they point at a note this
run creates: after a note's title or aliases change, ``full`` re-resolves every link.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

from pipeline.errors import EmbedderError, GraphError, InputError
from pipeline.graph import GraphNote, NoteState
from pipeline.graph.records import VectorSet
from pipeline.model import Note, normalize_text
from pipeline.vault.parse import EMBED_TEXT_VERSION, parse_note, read_note, read_note_bytes
from pipeline.vault.passages import passages, text_version

if TYPE_CHECKING:
    import numpy as np

    from pipeline.config import Settings

log = logging.getLogger(__name__)

#: Called as progress(done, total) once before the first batch and after every batch.
ProgressFn = Callable[[int, int], None]

#: Model batches (``embed_batch_size`` texts each) embedded and written to the graph
#: together: one transaction per window instead of per batch (a graph round trip per model
#: batch costs about as much as embedding the batch), while a run killed at any point still
#: leaves only whole windows behind.
WINDOW_BATCHES = 8
#: Windows a run is cut into at least, when it has fewer notes than that many full windows:
#: each window's write overlaps the next one's embedding, so only the last one waits.
MIN_WINDOWS = 4


def window_size(total: int, batch_size: int) -> int:
    """Notes per window: ``WINDOW_BATCHES`` model batches, or fewer (whole batches) so that
    a small run still has ``MIN_WINDOWS`` windows whose writes can overlap embedding."""
    batches = -(-total // (batch_size * MIN_WINDOWS))  # ceil
    return batch_size * max(1, min(WINDOW_BATCHES, batches))


#: Orphan deletes are sent in chunks so one call never carries an unbounded parameter list.
DELETE_CHUNK = 1000

# A cheap superset of a note's wikilink targets, used only to find which unchanged notes may
# link to a note created in this run; the real parser confirms before any edge is written.
_RAW_WIKILINK = re.compile(r"\[\[([^\]\[|#^\n]+)")


class GraphStore(Protocol):
    """The graph operations the sync needs (``pipeline.graph.GraphClient`` provides them)."""

    def ensure_schema(self, dims: int) -> None: ...
    def note_states(self) -> Mapping[str, NoteState]: ...
    def upsert_notes(self, rows: Sequence[GraphNote]) -> None: ...
    def delete_notes(self, paths: Sequence[str]) -> None: ...
    def set_links(self, source_paths: Sequence[str], pairs: Sequence[tuple[str, str]]) -> int: ...
    def upsert_notes_with_links(
        self,
        rows: Sequence[GraphNote],
        source_paths: Sequence[str],
        pairs: Sequence[tuple[str, str]],
    ) -> int: ...
    def note_vector_sets(self, paths: Sequence[str]) -> Mapping[str, VectorSet]: ...


class NoteRegistry(Protocol):
    """The vault registry (``pipeline.kodb.KoDB`` provides it)."""

    def notes(self) -> Mapping[str, Note]: ...


class TextEmbedder(Protocol):
    """What the sync needs of ``pipeline.embed.Embedder``."""

    model_id: str
    dims: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class EmbedReport:
    """The outcome of one sync run."""

    embedded: int
    deleted: int
    unchanged: int
    links: int  # LINKS_TO edges written by this run (distinct)
    skipped: tuple[tuple[str, str], ...]  # (path, reason), sorted by path
    seconds: float
    model: str
    dims: int
    moved: int = 0  # renamed or moved notes whose stored vector was kept (not in embedded)
    passages: int = 0  # passages of long notes written by this run (Passage nodes)

    def to_dict(self) -> dict[str, Any]:
        """The `vault-ko embed --json` document: counts first, then model, dims, skipped."""
        return {
            "embedded": self.embedded,
            "deleted": self.deleted,
            "unchanged": self.unchanged,
            "moved": self.moved,
            "passages": self.passages,
            "links": self.links,
            "seconds": round(self.seconds, 3),
            "model": self.model,
            "dims": self.dims,
            "skipped": [{"path": path, "reason": reason} for path, reason in self.skipped],
        }


@dataclass(frozen=True)
class SyncPlan:
    """What a run will do, decided from the registry and the graph states alone."""

    to_embed: tuple[str, ...]  # sorted
    orphans: tuple[str, ...]  # sorted
    unchanged: tuple[str, ...]  # sorted
    created: frozenset[str]  # the part of to_embed that has no node yet


def plan_sync(
    registry: Mapping[str, Note],
    states: Mapping[str, NoteState],
    *,
    model: str,
    dims: int,
    full: bool = False,
    text_version: int | None = None,
) -> SyncPlan:
    """Diff the registry against the graph: missing, stale (hash, model, dims or the rules
    that made the embedded text, when ``text_version`` is given) and orphans."""
    to_embed: list[str] = []
    unchanged: list[str] = []
    for path in sorted(registry):
        state = states.get(path)
        if (
            full
            or state is None
            or state.content_hash != registry[path].content_hash
            or state.model != model
            or state.dims != dims
            or (text_version is not None and state.text_version != text_version)
        ):
            to_embed.append(path)
        else:
            unchanged.append(path)
    orphans = tuple(sorted(set(states) - set(registry)))
    created = frozenset(p for p in to_embed if p not in states)
    return SyncPlan(tuple(to_embed), orphans, tuple(unchanged), created)


class LinkIndex:
    """Resolves wikilink targets to note paths: by path, then title, alias, file stem.

    Matching is case-insensitive (NFC + casefold); among several notes with the same key the
    shortest path wins, then the alphabetically first, so the result is deterministic.
    """

    def __init__(self) -> None:
        self._keys: list[dict[str, str]] = [{}, {}, {}, {}]  # path, title, alias, stem

    def add(self, path: str, title: str | None, aliases: Iterable[str] = ()) -> None:
        """Register a note under its path, title, aliases and stem."""
        for level, key in _link_keys(path, title, aliases):
            current = self._keys[level].get(key)
            if current is None or (len(path), path) < (len(current), current):
                self._keys[level][key] = path

    def resolve(self, target: str) -> str | None:
        """The note path a wikilink target means, or None when no note matches."""
        norm = _target_key(target)
        if not norm:
            return None
        for level in self._keys:
            path = level.get(norm)
            if path is not None:
                return path
        if "/" in norm:
            # Obsidian accepts a partial folder path: "sub/Note" for "a/sub/Note.md".
            suffix = "/" + norm
            matches = sorted((len(p), p) for k, p in self._keys[0].items() if k.endswith(suffix))
            if matches:
                return matches[0][1]
        return None


def _link_keys(path: str, title: str | None, aliases: Iterable[str]) -> list[tuple[int, str]]:
    """(LinkIndex level, normalised key) of every name a wikilink may use for a note: its
    path with and without ``.md`` (0), title (1), aliases (2) and file stem (3)."""
    # String operations, not PurePosixPath: every note of the vault passes here on each run.
    without_ext = (
        path[:-3] if path.lower().endswith(".md") and path[-4:-3] not in ("/", "") else path
    )
    names = [
        (0, without_ext),
        (0, path),
        (1, title),
        *((2, alias) for alias in aliases),
        (3, without_ext.rsplit("/", 1)[-1]),
    ]
    keys = [(level, _norm(name)) for level, name in names if name]
    return [(level, key) for level, key in keys if key]


def _target_key(target: str) -> str:
    """The normalised key a wikilink target is looked up by: "[[Note.md#Heading|shown]]"
    and "[[Note^block]]" both mean Note."""
    for sep in ("|", "#", "^"):
        target = target.split(sep, 1)[0]
    norm = _norm(target)
    return norm[: -len(".md")] if norm.endswith(".md") else norm


def _norm(text: str) -> str:
    return normalize_text(text.strip())


@dataclass(frozen=True)
class _Parsed:
    """What the sync keeps of a parsed note: enough to embed it and to write its links."""

    path: str
    title: str
    source_type: str
    content_hash: str
    embed_text: str
    links: tuple[str, ...]
    aliases: tuple[str, ...]
    body: str = ""  # the markdown body, cut into passages when the note is long


def sync_embeddings(
    settings: Settings,
    kodb: NoteRegistry,
    graph: GraphStore,
    embedder: TextEmbedder,
    *,
    full: bool = False,
    progress: ProgressFn | None = None,
    registry: Mapping[str, Note] | None = None,
) -> EmbedReport:
    """Bring the graph up to date with the vault registry (``registry``: as the caller just
    read it; else read now); see the module docstring."""
    started = time.monotonic()
    model, dims = embedder.model_id, int(embedder.dims)
    batch_size = max(1, int(settings.embed_batch_size))
    vault = Path(settings.vault)
    max_bytes = settings.vault_max_note_bytes

    cutter = _Cutter(settings.embed_long_notes, embedder)
    registry = dict(kodb.notes() if registry is None else registry)
    states, plan = _plan(graph, registry, model=model, dims=dims, full=full, cutter=cutter)
    moves = move_candidates(plan, registry, states, model=model, dims=dims, cutter=cutter)
    # Read before the orphans go: their vectors are the moved notes' own.
    stored = _stored_vectors(graph, sorted(set(moves.values())))
    _delete_orphans(graph, plan.orphans)
    parsed, skipped = _parse_to_embed(vault, registry, plan.to_embed, max_bytes)
    reuse = _kept_vectors(vault, moves, states, stored, parsed, max_bytes)
    # Nothing to embed: no link can have changed (every run's edges are its notes').
    links = _resolve_links(vault, registry, plan, parsed, max_bytes) if parsed else _NO_LINKS
    todo = _longest_first(plan, parsed, reuse)
    in_graph = (set(states) - set(plan.orphans)) | {item.path for item in links.linkers}
    writes = _embed_in_windows(
        todo,
        links,
        in_graph,
        graph,
        embedder,
        cutter,
        model=model,
        dims=dims,
        batch_size=batch_size,
        progress=progress,
        reuse=reuse,
    )
    written, edges = writes.embedded, writes.edges
    if written or plan.unchanged:
        _warm_index(graph, dims)
    if reuse:
        log.info("moved %d notes without embedding them again", len(reuse))
    return EmbedReport(
        embedded=written - len(reuse),
        moved=len(reuse),
        deleted=len(plan.orphans),
        unchanged=len(plan.unchanged),
        links=len(edges),
        passages=writes.passages,
        skipped=tuple(sorted(skipped)),
        seconds=time.monotonic() - started,
        model=model,
        dims=dims,
    )


def _warm_index(graph: GraphStore, dims: int) -> None:
    """One cheap vector search at the end of the run: a graph server's first vector search
    is many times slower than the next ones, and would otherwise be the next question's,
    within that question's call bound (issue 35, item 15). Never fails the sync: a graph
    that cannot answer it now is the next question's business."""
    warm = getattr(graph, "warm_vector_index", None)
    if warm is None:  # a store without a vector index to warm (the protocol's minimum)
        return
    started = time.monotonic()
    try:
        warm(dims)
    except GraphError as exc:
        log.warning("could not warm the vector index: %s", exc)
        return
    log.debug("vector index warmed in %.0f ms", (time.monotonic() - started) * 1e3)


def _plan(
    graph: GraphStore,
    registry: Mapping[str, Note],
    *,
    model: str,
    dims: int,
    full: bool,
    cutter: _Cutter,
) -> tuple[dict[str, NoteState], SyncPlan]:
    """Make the schema fit ``dims``, read the graph's states and plan the run (logged)."""
    graph.ensure_schema(dims)
    tidy = getattr(graph, "delete_orphan_passages", None)  # a store without passages has none
    if tidy is not None and (gone := tidy()):
        log.info("deleted the passages of %d notes whose node was gone", gone)
    states = dict(graph.note_states())
    plan = plan_sync(
        registry, states, model=model, dims=dims, full=full, text_version=cutter.version
    )
    log.info(
        "embed plan: %d to embed (%d new), %d orphans, %d unchanged",
        len(plan.to_embed),
        len(plan.created),
        len(plan.orphans),
        len(plan.unchanged),
    )
    return states, plan


def move_candidates(
    plan: SyncPlan,
    registry: Mapping[str, Note],
    states: Mapping[str, NoteState],
    *,
    model: str,
    dims: int,
    cutter: _Cutter,
) -> dict[str, str]:
    """New path -> orphan path, for each note created by this run whose content hash an
    orphan embedded by this model, at these dims and under these text rules has (a rename
    or a move). Several of the same content pair up in path order, one to one."""
    version = cutter.version
    by_hash: dict[str, list[str]] = {}
    for path in plan.orphans:
        st = states[path]
        if st.model == model and st.dims == dims and st.text_version == version:
            by_hash.setdefault(st.content_hash, []).append(path)
    moves: dict[str, str] = {}
    for path in sorted(plan.created):
        olds = by_hash.get(registry[path].content_hash)
        if olds:
            moves[path] = olds.pop(0)
    return moves


def _stored_vectors(graph: GraphStore, paths: Sequence[str]) -> dict[str, VectorSet]:
    """The stored vectors (a long note's passages with them) of the moved notes' old nodes,
    read ``DELETE_CHUNK`` at a time; a read that fails keeps none (those notes are embedded
    instead: a move is a saving, never a reason for a run to fail)."""
    stored: dict[str, VectorSet] = {}
    try:
        for start in range(0, len(paths), DELETE_CHUNK):
            stored.update(graph.note_vector_sets(paths[start : start + DELETE_CHUNK]))
    except GraphError as exc:
        log.warning("moved notes are embedded again: their stored vectors were not read: %s", exc)
        return {}
    return stored


def _kept_vectors(
    vault: Path,
    moves: Mapping[str, str],
    states: Mapping[str, NoteState],
    stored: Mapping[str, VectorSet],
    parsed: Mapping[str, _Parsed],
    max_bytes: int,
) -> dict[str, VectorSet]:
    """The stored vectors that still hold for the moved notes: the file read now is the one
    the old node was embedded from (the registry may be older than the file), and the text
    the model read at the old path is the text it would read at the new one."""
    kept: dict[str, VectorSet] = {}
    for new, old in moves.items():
        item, vector = parsed.get(new), stored.get(old)
        if item is None or vector is None or item.content_hash != states[old].content_hash:
            continue
        if _text_at(vault, item, old, max_bytes) == _text_of(item):
            kept[new] = vector
    return kept


def _text_at(vault: Path, item: _Parsed, old: str, max_bytes: int) -> str | None:
    """The text the model read when the note now at ``item.path`` lived at ``old`` (its
    file parsed under the old path: a title from the file name differs); None: unreadable."""
    try:
        raw, mtime = read_note_bytes(vault, item.path, max_bytes)
        before = parse_note(raw, old, item.source_type, mtime=mtime)  # type: ignore[arg-type]
    except InputError:
        return None
    if before.content_hash != item.content_hash:
        return None  # changed again since it was read
    text = before.embed_text
    return text.strip() or before.title or PurePosixPath(old).stem


def _delete_orphans(graph: GraphStore, orphans: Sequence[str]) -> None:
    """Delete the orphans' nodes (with their edges), ``DELETE_CHUNK`` paths per call."""
    for start in range(0, len(orphans), DELETE_CHUNK):
        graph.delete_notes(orphans[start : start + DELETE_CHUNK])


def _parse_to_embed(
    vault: Path, registry: Mapping[str, Note], to_embed: Sequence[str], max_bytes: int
) -> tuple[dict[str, _Parsed], list[tuple[str, str]]]:
    """Parse every note this run embeds, and the (path, reason) of those that cannot be read.

    All are parsed up front (cheap next to embedding), so a link in an early batch resolves
    against the titles and aliases of notes in later batches.
    """
    skipped: list[tuple[str, str]] = []
    parsed: dict[str, _Parsed] = {}
    for path in to_embed:
        try:
            parsed[path] = _read(vault, path, registry[path], max_bytes)
        except InputError as exc:
            skipped.append((path, exc.reason))
    return parsed, skipped


@dataclass(frozen=True)
class _Links:
    """Every link of the run, resolved once."""

    linkers: list[_Parsed]  # unchanged notes whose links may point at a note created now
    targets: dict[str, tuple[str, ...]]  # source path -> resolved target paths, sorted
    incoming: dict[str, set[str]]  # note created now -> the notes linking to it


_NO_LINKS = _Links([], {}, {})


def _resolve_links(
    vault: Path,
    registry: Mapping[str, Note],
    plan: SyncPlan,
    parsed: Mapping[str, _Parsed],
    max_bytes: int,
) -> _Links:
    """Index every note's names, then resolve the links of the parsed notes and linkers."""
    index = LinkIndex()
    for path, note in registry.items():
        item = parsed.get(path)
        index.add(path, item.title if item else note.title, item.aliases if item else ())
    linkers = _complete_index(vault, registry, plan, parsed, index, max_bytes)

    targets: dict[str, tuple[str, ...]] = {}
    incoming: dict[str, set[str]] = {}
    for item in (*parsed.values(), *linkers):
        resolved = {index.resolve(t) for t in item.links} - {None, item.path}
        targets[item.path] = tuple(sorted(p for p in resolved if p is not None))
        for target in targets[item.path]:
            if target in plan.created:
                incoming.setdefault(target, set()).add(item.path)
    return _Links(linkers, targets, incoming)


def _longest_first(
    plan: SyncPlan, parsed: Mapping[str, _Parsed], reuse: Mapping[str, Any]
) -> list[_Parsed]:
    """The notes to write: moved ones first (no model call), then those to embed, longest
    text first (ties by path), as SentenceTransformer.encode orders its own input: a forward
    pass pads every text to the longest of its batch, so batches of similar lengths waste
    least."""
    return sorted(
        (parsed[p] for p in plan.to_embed if p in parsed),
        key=lambda item: (item.path not in reuse, -len(_text_of(item)), item.path),
    )


def _embed_in_windows(
    todo: Sequence[_Parsed],
    links: _Links,
    in_graph: set[str],
    graph: GraphStore,
    embedder: TextEmbedder,
    cutter: _Cutter,
    *,
    model: str,
    dims: int,
    batch_size: int,
    progress: ProgressFn | None,
    reuse: Mapping[str, VectorSet] | None = None,
) -> _WindowWrites:
    """Embed ``todo`` window by window, each written (notes and edges in one transaction)
    while the next is embedded; returns what the writes did (notes, passages, distinct
    edges). A note in ``reuse`` is written with those vectors instead of the model's.

    ``in_graph`` (the paths with a node) grows as windows are written.
    """
    reuse = reuse or {}
    total = len(todo)
    if progress:
        progress(0, total)
    window = window_size(total, batch_size)
    # Each window is written by a thread while the next one is embedded (the graph's work
    # is the server's, the model's is torch's: both run at once). At most one write is in
    # flight, and a failed write stops the run before another window is sent.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vault-ko-embed-write") as writer:
        writes = _WindowWrites(writer, graph, total, progress)
        for start in range(0, total, window):
            batch = todo[start : start + window]
            vectors = _vectors_of(batch, embedder, cutter, reuse)
            rows = _graph_rows(batch, vectors, model=model, dims=dims, version=cutter.version)
            writes.settle()  # the previous window is in the graph before this one's edges go
            in_graph.update(item.path for item in batch)
            writes.submit(rows, batch, _window_links(batch, links, in_graph))
        writes.settle()
    return writes


def _vectors_of(
    batch: Sequence[_Parsed],
    embedder: TextEmbedder,
    cutter: _Cutter,
    reuse: Mapping[str, VectorSet],
) -> list[np.ndarray]:
    """Each note's vectors (one row, or one per passage of a long note): kept ones as
    stored, the model's for the rest (one call for the whole window)."""
    import numpy as np

    fresh = [item for item in batch if item.path not in reuse]
    texts = [cutter.texts(item) for item in fresh]
    made = embedder.embed([t for group in texts for t in group]) if fresh else None
    made_for: dict[str, np.ndarray] = {}
    start = 0
    for item, group in zip(fresh, texts, strict=True):
        made_for[item.path] = made[start : start + len(group)]  # type: ignore[index]
        start += len(group)
    return [
        np.asarray(reuse[item.path], dtype=np.float32)
        if item.path in reuse
        else made_for[item.path]
        for item in batch
    ]


def _graph_rows(
    batch: Sequence[_Parsed],
    vectors: Sequence[np.ndarray],
    *,
    model: str,
    dims: int,
    version: int = EMBED_TEXT_VERSION,
) -> list[GraphNote]:
    """The graph nodes of a window's notes and their vectors (the first is the note's own,
    the rest a long note's passages), all stamped with one time."""
    now = time.time()
    return [
        GraphNote(
            path=item.path,
            title=item.title,
            source_type=item.source_type,
            content_hash=item.content_hash,
            model=model,
            dims=dims,
            embedded_at=now,
            embedding=tuple(rows[0].tolist()),
            text_version=version,
            passages=tuple(tuple(row.tolist()) for row in rows[1:]),
        )
        for item, rows in zip(batch, vectors, strict=True)
    ]


class _Cutter:
    """How a note becomes the texts the model embeds under ``embed_long_notes``: always one
    text with ``head``; with ``passages``, a long note's passages (``vault/passages.py``).
    The model is asked for token counts only when a note is embedded, so a run with
    nothing to embed never loads it."""

    def __init__(self, mode: str, embedder: TextEmbedder) -> None:
        self.mode = mode
        self.version = text_version(mode)
        self._embedder = embedder

    def texts(self, item: _Parsed) -> list[str]:
        whole = _text_of(item)
        if self.mode == "head":
            return [whole]
        lengths = getattr(self._embedder, "token_lengths", None)
        limit = int(getattr(self._embedder, "max_seq_length", 0) or 0)
        if not callable(lengths) or limit <= 0 or lengths([whole]) is None:
            raise EmbedderError(
                f"{self._embedder.model_id} cannot count its tokens, so long notes cannot be "
                'cut into passages; set embed_long_notes = "head" (docs/long-notes.md)'
            )
        cut = passages(item.title, item.body, lengths, limit)
        # The note's own vector stays the one it always had (its head, what the model reads
        # of the whole text); a long note's passages, every one of them, come after it.
        return [whole, *cut] if len(cut) > 1 else [whole]


@dataclass(frozen=True)
class _WindowLinks:
    """The edges a window's transaction writes."""

    sources: set[str]  # the notes whose outgoing edges it replaces
    ordered: list[str]  # the same, sorted
    pairs: list[tuple[str, str]]  # (source, target) of every resolved link of the sources
    written: set[tuple[str, str]]  # the pairs whose target has a node: the edges it writes


def _window_links(batch: Sequence[_Parsed], links: _Links, in_graph: set[str]) -> _WindowLinks:
    """Edges of the window's notes, and of notes already in the graph whose targets were
    just created (the edge could not be written before the target existed)."""
    sources = {item.path for item in batch}
    for item in batch:
        sources.update(s for s in links.incoming.get(item.path, ()) if s in in_graph)
    ordered = sorted(sources)
    pairs = [(src, dst) for src in ordered for dst in links.targets.get(src, ())]
    written = {(src, dst) for src, dst in pairs if dst in in_graph}
    return _WindowLinks(sources, ordered, pairs, written)


class _WindowWrites:
    """The windows' graph writes, at most one in flight, and what the settled ones did."""

    def __init__(
        self,
        writer: ThreadPoolExecutor,
        graph: GraphStore,
        total: int,
        progress: ProgressFn | None,
    ) -> None:
        self._writer = writer
        self._graph = graph
        self._total = total
        self._progress = progress
        self._pending: tuple[Future[int], Sequence[_Parsed], _WindowLinks] | None = None
        self._passages = 0  # of the write in flight
        self.embedded = 0
        self.passages = 0
        # Distinct edges in place after the run among those this run wrote: a note re-linked
        # in a later window (its target was created then) is not counted twice.
        self.edges: set[tuple[str, str]] = set()

    def submit(
        self, rows: Sequence[GraphNote], batch: Sequence[_Parsed], links: _WindowLinks
    ) -> None:
        """Send a window's write; call ``settle`` first."""
        self._passages = sum(len(row.passages) for row in rows)
        # One transaction for the window's notes and their edges: a run killed between the
        # two would leave notes that the next run sees unchanged and never links.
        future = self._writer.submit(
            self._graph.upsert_notes_with_links, rows, links.ordered, links.pairs
        )
        self._pending = (future, batch, links)

    def settle(self) -> None:
        """Wait for the write in flight, if any, and count what it did."""
        if self._pending is None:
            return
        future, batch, links = self._pending
        self._pending = None
        future.result()  # re-raises the write's error: nothing later is sent
        self.embedded += len(batch)
        self.passages += self._passages
        self.edges.difference_update({e for e in self.edges if e[0] in links.sources})
        self.edges.update(links.written)
        if self._progress:
            self._progress(self.embedded, self._total)


def _read(vault: Path, path: str, note: Note, max_bytes: int) -> _Parsed:
    parsed = read_note(vault, path, note.source_type, max_bytes)
    return _Parsed(
        path=path,
        title=parsed.title or note.title,
        source_type=note.source_type,
        content_hash=parsed.content_hash,
        embed_text=parsed.embed_text,
        links=parsed.link_targets,
        aliases=parsed.aliases,
        body=parsed.body,
    )


def _text_of(item: _Parsed) -> str:
    # An empty note would embed to a meaningless vector; the title is its best summary.
    return item.embed_text.strip() or item.title or PurePosixPath(item.path).stem


def _complete_index(
    vault: Path,
    registry: Mapping[str, Note],
    plan: SyncPlan,
    parsed: Mapping[str, _Parsed],
    index: LinkIndex,
    max_bytes: int,
) -> list[_Parsed]:
    """One pass over the unchanged notes (only when needed) that

    - adds the aliases of unchanged notes a link of this run may mean (aliases are not in the
      registry; only link targets nothing else resolves trigger it), and
    - returns the unchanged notes whose wikilinks may point at a note created in this run:
      their edges are written once the target node exists (which also repairs the edges of
      a run killed between batches).

    Raw-text checks pick the candidates; only candidates are parsed.
    """
    unresolved = {
        _target_key(t) for item in parsed.values() for t in item.links if index.resolve(t) is None
    } - {""}
    created_keys = {
        key
        for path in plan.created
        if path in parsed
        for _, key in _link_keys(path, parsed[path].title, parsed[path].aliases)
    }
    if not plan.unchanged or not (unresolved or created_keys):
        return []

    alias_candidates: list[str] = []
    link_candidates: list[str] = []
    for path in plan.unchanged:
        try:
            raw = (vault / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # gone since ingest; the next ingest drops it from the registry
        if unresolved and raw.startswith("---"):
            head = _norm(raw[: raw.find("\n---", 3) + 1 or len(raw)])
            if any(target in head for target in unresolved):
                alias_candidates.append(path)
        if created_keys and any(_target_key(t) in created_keys for t in _RAW_WIKILINK.findall(raw)):
            link_candidates.append(path)

    # Candidates are parsed once each, by the parser ingest uses, so an unchanged note's
    # aliases read exactly as they would if it were embedded in this run.
    candidates: dict[str, _Parsed] = {}
    for path in dict.fromkeys([*alias_candidates, *link_candidates]):
        try:
            candidates[path] = _read(vault, path, registry[path], max_bytes)
        except InputError:
            continue  # it is not embedded in this run; ingest reports its bad input
    for path in alias_candidates:
        if path in candidates:
            index.add(path, registry[path].title, candidates[path].aliases)
    return [candidates[path] for path in link_candidates if path in candidates]
