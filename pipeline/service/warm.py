"""The service's warm answers: what load-context does for a batch, kept across requests.

A warm `POST /query` spent most of its time in two places: the graph's vector search (the
index query ships the candidates' embeddings over Bolt) and the KO-DB statements of the
bridge and the facts (figures in docs/benchmarks-history.md). The service keeps

* every note vector in memory (``batch/exact.py``'s ExactSearch: one matrix product per
  question, exact, so at least as good as the index's over-fetch), whatever the vault's
  size and whichever database holds KO-DB. The graph stays the store of record: each
  question first reads the vectors' generation from it (``GraphClient.generation``, one
  round trip that is also the question's graph check), which every embed write increments
  in its own transaction, and a new generation reloads the vectors. A graph that does not
  answer sends the question down the CLI's path (its graph check, then fallback);
* a memo of KO-DB reads (``batch/memo.py``'s CachedKodb), for a KO-DB in a SQLite file,
  dropped when the file or its write-ahead log changes (every commit touches one of them:
  ingest, import, calibrate), or the stamp every graph write of this vault's clients
  touches (``graph.client.changes_path``), and at the latest after ``RELOAD_SECONDS`` (a
  writer using another state dir). PostgreSQL has no such cheap check: its reads are not
  memoised;
* over the memo, a resident copy of KO-DB's facts (``kodb/resident.py``: the bridge and
  the summaries answered from columns in memory, no statement), read in a child process
  (so the answering threads keep the GIL: 1.6M facts take seconds to read) whenever the
  SQLite file or its log changed, up to ``service_resident_facts`` facts. Until a copy of
  the current KO-DB is in, questions are answered through the memo alone.

The questions still go through ``Pipeline.ask_many`` with the exact search as its batch
search, as load-context does.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pipeline.app import App
from pipeline.batch.exact import ExactSearch
from pipeline.errors import GraphError, GraphQueryError, GraphUnavailable, ServiceError
from pipeline.graph.records import NoteState
from pipeline.memory import release_free_memory
from pipeline.model import Answer, Hit
from pipeline.query import Pipeline, QueryOptions
from pipeline.watch import watcher_running

log = logging.getLogger(__name__)

#: A copy older than this is reloaded even when no change was seen (a foreign writer).
RELOAD_SECONDS: Final = 30.0
#: Memo entries kept before the copy is rebuilt (memory stays flat on long runs).
MAX_MEMO_ENTRIES: Final = 200_000
#: Without a watcher, an answer compares the vault on disk with KO-DB (as a cold one does),
#: reusing a comparison at most this many seconds old: a scan of a large vault per question
#: would cost more than the answer.
EDITS_REUSE_S: Final = 5.0

Signature = tuple[Any, ...]


@dataclass(frozen=True)
class _Copy:
    signature: Signature
    pipeline: Pipeline
    loaded_at: float


class _NoGeneration(Exception):
    """The graph did not answer the generation read (the question takes the CLI's path)."""


@dataclass(frozen=True)
class _Resident:
    signature: Signature  # the KO-DB file's and its log's stats the copy was read at
    kodb: Any | None  # ResidentKodb without a base; None: not held (too many facts, failed)


@dataclass(frozen=True)
class _Vectors:
    generation: int
    exact: Any | None  # ExactSearch, or None: the index answers (empty or mixed sizes)
    states: dict[str, NoteState]  # what the rows of ``exact`` were read as


class WarmAnswers:
    """Answers for the service, from warm copies of the vault's vectors and KO-DB."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._copy: _Copy | None = None
        self._vectors: _Vectors | None = None
        self._loader: threading.Thread | None = None
        self._resident: _Resident | None = None
        self._reader = ThreadPoolExecutor(max_workers=4, thread_name_prefix="vault-ko-generation")
        self._resident_loader: threading.Thread | None = None
        self._resident_pipeline: tuple[_Copy, _Resident, Pipeline] | None = None
        #: How many times the note vectors were (re)loaded from the graph, and how many
        #: note vectors those loads read (a full load reads all, a refresh the changed).
        self.vector_loads = 0
        self.vectors_read = 0
        #: How many times KO-DB's facts were read into memory (or tried to be).
        self.resident_loads = 0

    def ask(self, question: str, opts: QueryOptions) -> Answer:
        # A KO-DB deleted or replaced under the service fails the question (503, saying
        # so) instead of being answered from the old file or an empty new one.
        self.app.kodb.check_file()
        copy = self._current()
        if copy is None:  # KO-DB on PostgreSQL: its reads are not memoised
            self.app.refresh_calibration()
            pipeline = self.app.pipeline()
        else:
            pipeline = self._over_resident(copy) or copy.pipeline
        # The generation is read while the question is embedded (one short Bolt round trip,
        # which the longer embedding hides).
        generation = self._reader.submit(self.app.graph.generation)

        def search(vectors: Any, k: int) -> list[list[Hit]]:
            try:
                current = generation.result()
            except GraphError as exc:
                raise _NoGeneration from exc
            exact = self._exact(current, pipeline)
            if exact is None:  # being (re)loaded: the index answers
                return [pipeline.index_search(v, k) for v in vectors]
            return exact.search_many(vectors, k, pipeline.index_search)  # type: ignore[no-any-return]

        # No watcher keeps the stores current: the answer says what it cannot see, as a
        # cold one does (a comparison a few seconds old is reused).
        edits = self.app.settings.query_unsynced == "check" and not watcher_running(
            self.app.settings.state_dir
        )
        checks = {"check_edits": edits, "edits_reuse_s": EDITS_REUSE_S}
        try:
            return pipeline.ask_many([question], opts, search=search, graph_checked=True, **checks)[
                0
            ]
        except _NoGeneration:
            # Unreachable (or not set up): the CLI's path, whose own graph check decides
            # between an index answer and the fallback with its reason.
            return pipeline.ask_many([question], opts, **checks)[0]

    def prime(self, question: str, timeout: float) -> bool:
        """Answer ``question`` once, which starts reading the warm copies (the note vectors,
        the resident facts), wait for them for up to ``timeout`` seconds, and answer it
        again over them: the first question a client asks then finds the copies in memory
        and every code path of a warm answer loaded, instead of paying for both while the
        reads compete with it for the cores. True when both reads finished in time."""
        deadline = time.monotonic() + timeout
        opts = QueryOptions.from_settings(self.app.settings)
        self.ask(question, opts)
        for settle in (self.settle, self.settle_facts):
            settle(max(deadline - time.monotonic(), 0.0))
        loading = any(t is not None and t.is_alive() for t in (self._loader, self._resident_loader))
        self.ask(question, opts)
        return not loading

    # -- the KO-DB copy -------------------------------------------------------------------
    def signature(self) -> Signature | None:
        """What the KO-DB memo depends on, read with a few ``stat`` calls; None: no memo."""
        from pipeline.graph.client import changes_path

        s = self.app.settings
        url = s.effective_kodb_url
        if not url.startswith("sqlite:///"):
            return None
        db = Path(url.removeprefix("sqlite:///"))
        # Opened first: opening creates the write-ahead log, which would move the stats.
        self.app.kodb  # noqa: B018
        stamp = changes_path(s.state_dir, self.app.graph.url)
        return tuple(_stat(p) for p in (db, db.with_name(db.name + "-wal"), stamp))

    def _current(self) -> _Copy | None:
        signature = self.signature()
        if signature is None:
            return None
        copy = self._copy
        if copy is not None and self._fresh(copy, signature):
            return copy
        with self._lock:
            copy = self._copy
            if copy is None or not self._fresh(copy, signature):
                copy = self._copy = self._load(signature)
        return copy

    @staticmethod
    def _fresh(copy: _Copy, signature: Signature) -> bool:
        if copy.signature != signature or time.monotonic() - copy.loaded_at > RELOAD_SECONDS:
            return False
        memo = getattr(copy.pipeline.app.kodb, "entries", None)
        return not (callable(memo) and memo() > MAX_MEMO_ENTRIES)

    def _load(self, signature: Signature) -> _Copy:
        from pipeline.batch.memo import CachedKodb

        base = self.app.pipeline()
        memo = CachedKodb(base.kodb)
        pipeline = self.app.sharing(kodb=memo).pipeline(include_private=not base.private)
        return _Copy(signature, pipeline, time.monotonic())

    # -- the resident facts ---------------------------------------------------------------
    def _over_resident(self, copy: _Copy) -> Pipeline | None:
        """The memo's pipeline over the resident copy of this KO-DB, or None while it is
        being read (or cannot be held); starts the read when KO-DB changed."""
        if self.app.settings.service_resident_facts <= 0:
            return None
        signature = copy.signature[:2]  # the KO-DB file and its log: what the facts are
        held = self._resident
        if held is None or held.signature != signature:
            self._read_resident(signature)
            return None
        if held.kodb is None:
            return None
        made = self._resident_pipeline
        if made is not None and made[0] is copy and made[1] is held:
            return made[2]
        memo = copy.pipeline.kodb
        # The memo hides private notes from KO-DB already, but the graph's vectors and the
        # answer's paths are hidden by the pipeline's own privacy, as the memo's is.
        pipeline = self.app.sharing(kodb=held.kodb.over(memo)).pipeline(
            include_private=not copy.pipeline.private
        )
        self._resident_pipeline = (copy, held, pipeline)
        return pipeline

    def _read_resident(self, signature: Signature) -> None:
        with self._lock:
            if self._resident_loader is not None and self._resident_loader.is_alive():
                return  # one read at a time; the next question asks again
            self._resident_loader = threading.Thread(
                target=self._load_resident,
                args=(signature,),
                name="vault-ko-facts",
                daemon=True,
            )
            self._resident_loader.start()

    def _load_resident(self, signature: Signature) -> None:
        from pipeline.kodb.resident import ResidentKodb

        s = self.app.settings
        private = self.app.private
        t0 = time.monotonic()
        try:
            data = read_in_child(s.effective_kodb_url, private.globs, s.service_resident_facts)
        except Exception as exc:  # a background thread must not die silently
            log.warning("reading KO-DB's facts into memory failed: %s", exc)
            data = None
        kodb = None
        if data is not None:
            kodb = ResidentKodb(None, data, private.is_private if private else None)
            log.info(
                "KO-DB facts in memory: %d facts, about %d MB, read in %.1f s",
                data.facts,
                data.nbytes // 2**20,
                time.monotonic() - t0,
            )
        self.resident_loads += 1
        self._resident = _Resident(signature, kodb)

    @property
    def warm_facts(self) -> int:
        """How many KO-DB facts answers read from memory (0: none yet, or none held)."""
        held = self._resident
        return held.kodb.facts if held is not None and held.kodb is not None else 0

    def settle_facts(self, timeout: float | None = None) -> None:
        """Wait for a read of the resident facts to finish (tests, benchmarks)."""
        loader = self._resident_loader
        if loader is not None:
            loader.join(timeout)

    # -- the vectors ----------------------------------------------------------------------
    def _exact(self, generation: int, pipeline: Pipeline) -> Any | None:
        """The warm search for this generation, or None (the index answers) while it is
        being (re)loaded in the background: a question never waits for a load (reading a
        large vault's vectors over Bolt takes seconds) nor gets another generation's
        vectors."""
        vectors = self._vectors
        if vectors is not None and vectors.generation == generation:
            return vectors.exact
        with self._lock:
            if self._loader is None or not self._loader.is_alive():
                self._loader = threading.Thread(
                    target=self._refresh,
                    args=(generation, pipeline, vectors),
                    name="vault-ko-vectors",
                    daemon=True,
                )
                self._loader.start()
        return None

    @property
    def warm_vectors(self) -> int:
        """How many note vectors questions are searched in memory (0: the graph's index
        answers, before the first load or when the vectors cannot be held)."""
        vectors = self._vectors
        return len(vectors.exact.paths) if vectors is not None and vectors.exact else 0

    def settle(self, timeout: float | None = None) -> None:
        """Wait for a background load of the vectors to finish (tests, benchmarks)."""
        loader = self._loader
        if loader is not None:
            loader.join(timeout)

    def _refresh(self, generation: int, pipeline: Pipeline, old: _Vectors | None) -> None:
        try:
            fresh = self._load_vectors(generation, pipeline, old)
        except Exception as exc:  # a background thread must not die silently
            log.warning("loading the note vectors failed: %s", exc)
            fresh = None
        if fresh is not None:
            self._vectors = fresh
        # The load's Bolt records and the replaced copy are freed, but kept otherwise.
        release_free_memory()

    def _load_vectors(self, generation: int, pipeline: Pipeline, old: _Vectors | None) -> _Vectors:
        """All vectors (the first time), else only those whose note state changed since
        ``old``: the generation moved, so the graph's states say which ones."""
        self.vector_loads += 1
        try:
            if old is None or old.exact is None:
                # States first: a write after them shows as a change on the next refresh.
                states = dict(pipeline.graph.note_states())
                exact = ExactSearch.load(pipeline.graph, pipeline.kodb)
                self.vectors_read += exact.notes
            else:
                exact, states = self._changed_rows(old, pipeline)
        except GraphUnavailable as exc:  # gone meanwhile: tried again on the next question
            log.info("no warm copy of the note vectors: %s", exc)
            return old if old is not None else _Vectors(-1, None, {})
        except GraphError as exc:  # embeddings of several sizes: the index path says so
            log.info("no warm copy of the note vectors: %s", exc)
            return _Vectors(generation, None, {})
        dims = getattr(pipeline.embedder, "dims", None)
        if not exact.paths or exact.dims != dims:  # another model's vectors: as the CLI
            return _Vectors(generation, None, states)
        log.info(
            "note vectors loaded: %d notes (%d vectors), generation %d",
            exact.notes,
            len(exact.paths),
            generation,
        )
        return _Vectors(generation, exact, states)

    def _changed_rows(self, old: _Vectors, pipeline: Pipeline) -> tuple[Any, dict[str, NoteState]]:
        import numpy as np

        states = dict(pipeline.graph.note_states())
        changed = sorted(p for p, st in states.items() if old.states.get(p) != st)
        read = pipeline.graph.note_vector_sets(changed) if changed else {}
        self.vectors_read += len(read)
        rows: dict[str, list[int]] = {}
        for i, p in enumerate(old.exact.paths):  # a long note has a row per passage
            rows.setdefault(p, []).append(i)
        paths, vectors = [], []
        for path in sorted(states):
            if path in read:
                kept = [np.asarray(v, dtype=np.float32) for v in read[path]]
            elif path in rows and path not in changed:
                kept = [old.exact.matrix[i] for i in rows[path]]
            else:
                continue  # no embedding stored (yet)
            vectors.extend(kept)
            paths.extend([path] * len(kept))
        if len({v.size for v in vectors}) > 1:
            raise GraphQueryError("the graph holds embeddings of several sizes")
        matrix = np.vstack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)
        notes = pipeline.kodb.notes()
        titles: list[str | None] = []
        types: list[str | None] = []
        for path in paths:  # per row, as ExactSearch.load
            note = notes.get(path)
            same = note is not None and note.content_hash == states[path].content_hash
            titles.append(note.title if same and note else None)
            types.append(note.source_type if same and note else None)
        exact = ExactSearch(paths, titles, types, matrix, old.exact.dialect)
        return exact, states


#: Seconds a reading child may take before it is given up: far above what millions of
#: facts take (figures in docs/benchmarks-history.md).
RESIDENT_READ_TIMEOUT: Final = 600.0


def read_in_child(url: str, private_globs: tuple[str, ...], max_facts: int) -> Any | None:
    """KO-DB's facts as a ``ResidentFacts`` read by a child process (spawned: the service's
    threads keep the GIL, and the read's peak memory, several times the copy's, goes with
    the child); None when KO-DB holds more than ``max_facts`` facts. The child is a daemon:
    a service that stops does not wait for it. Raises ServiceError when it fails or dies."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(
        target=_read_facts,
        args=(send, url, private_globs, max_facts),
        name="vault-ko-facts-reader",
        daemon=True,
    )
    child.start()
    send.close()
    try:
        if not receive.poll(RESIDENT_READ_TIMEOUT):
            raise ServiceError(f"reading KO-DB's facts took over {RESIDENT_READ_TIMEOUT:.0f} s")
        kind, payload = receive.recv()
    except EOFError:
        child.join(5)
        raise ServiceError(
            f"the process reading KO-DB's facts died (exit code {child.exitcode}; killed, or "
            "out of memory: lower service_resident_facts or set it to 0)"
        ) from None
    finally:
        receive.close()
        if child.is_alive():
            child.join(5)
        if child.is_alive():
            child.kill()
            child.join()
    if kind == "error":
        raise ServiceError(str(payload))
    if kind == "too many":
        log.warning(
            "KO-DB holds %d facts, more than service_resident_facts (%d): answers read them "
            "from KO-DB",
            payload,
            max_facts,
        )
        return None
    return payload


def _read_facts(send: Any, url: str, private_globs: tuple[str, ...], max_facts: int) -> None:
    """The child's work: ("facts", ResidentFacts), ("too many", count) or ("error", text)."""
    from pipeline.kodb import KoDB
    from pipeline.privacy import PrivateNotes

    private = PrivateNotes(private_globs)
    try:
        with KoDB.open(url, create=False) as kodb:
            count = kodb.count_facts()
            if count > max_facts:
                send.send(("too many", count))
            else:
                send.send(("facts", kodb.resident_copy(private.is_private if private else None)))
    except Exception as exc:  # the parent reports it; a traceback here would go nowhere
        send.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        send.close()


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size
