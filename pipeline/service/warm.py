"""The service's warm answers: what load-context does for a batch, kept across requests.

A warm `POST /query` spent most of its time in two places: the graph's vector search (33 ms
on examples/vault, about 40 ms at 20,000 notes: the index query ships the candidates'
embeddings over Bolt) and the KO-DB statements of the bridge and the facts (25 ms). The
service keeps

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
  memoised.

The questions still go through ``Pipeline.ask_many`` with the exact search as its batch
search, as load-context does.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pipeline.app import App
from pipeline.errors import GraphError, GraphUnavailable
from pipeline.model import Answer, Hit
from pipeline.query import Pipeline, QueryOptions

log = logging.getLogger(__name__)

#: A copy older than this is reloaded even when no change was seen (a foreign writer).
RELOAD_SECONDS: Final = 30.0
#: Memo entries kept before the copy is rebuilt (memory stays flat on long runs).
MAX_MEMO_ENTRIES: Final = 200_000

Signature = tuple[Any, ...]


@dataclass(frozen=True)
class _Copy:
    signature: Signature
    pipeline: Pipeline
    loaded_at: float


@dataclass(frozen=True)
class _Vectors:
    generation: int
    exact: Any | None  # ExactSearch, or None: the index answers (empty or mixed sizes)


class WarmAnswers:
    """Answers for the service, from warm copies of the vault's vectors and KO-DB."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._copy: _Copy | None = None
        self._vectors: _Vectors | None = None
        #: How many times the note vectors were (re)loaded from the graph.
        self.vector_loads = 0

    def ask(self, question: str, opts: QueryOptions) -> Answer:
        copy = self._current()
        if copy is None:  # KO-DB on PostgreSQL: its reads are not memoised
            self.app.refresh_calibration()
            pipeline = self.app.pipeline()
        else:
            pipeline = copy.pipeline
        try:
            generation = self.app.graph.generation()
        except GraphError:
            # Unreachable (or not set up): the CLI's path, whose own graph check decides
            # between an index answer and the fallback with its reason.
            return pipeline.ask_many([question], opts)[0]
        exact = self._exact(generation, pipeline)
        search = None
        if exact is not None:

            def search(vectors: Any, k: int) -> list[list[Hit]]:
                return exact.search_many(vectors, k, pipeline.index_search)  # type: ignore[no-any-return]

        return pipeline.ask_many([question], opts, search=search, graph_checked=True)[0]

    # -- the KO-DB copy -------------------------------------------------------------------
    def signature(self) -> Signature | None:
        """What the KO-DB memo depends on, read with a few ``stat`` calls; None: no memo."""
        from pipeline.graph.client import changes_path

        s = self.app.settings
        url = s.effective_kodb_url
        if not url.startswith("sqlite:///"):
            return None
        db = Path(url.removeprefix("sqlite:///"))
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
        pipeline = Pipeline(app=self.app.sharing(kodb=memo), include_private=not base.private)
        return _Copy(signature, pipeline, time.monotonic())

    # -- the vectors ----------------------------------------------------------------------
    def _exact(self, generation: int, pipeline: Pipeline) -> Any | None:
        vectors = self._vectors
        if vectors is None or vectors.generation != generation:
            with self._lock:
                vectors = self._vectors
                if vectors is None or vectors.generation != generation:
                    vectors = self._vectors = self._load_vectors(generation, pipeline)
        return vectors.exact

    def _load_vectors(self, generation: int, pipeline: Pipeline) -> _Vectors:
        from pipeline.batch.exact import ExactSearch

        self.vector_loads += 1
        try:
            exact = ExactSearch.load(pipeline.graph, pipeline.kodb)
        except GraphUnavailable as exc:  # gone meanwhile: tried again on the next question
            log.info("no warm copy of the note vectors: %s", exc)
            return _Vectors(-1, None)
        except GraphError as exc:  # embeddings of several sizes: the index path says so
            log.info("no warm copy of the note vectors: %s", exc)
            return _Vectors(generation, None)
        dims = getattr(pipeline.embedder, "dims", None)
        if not exact.paths or exact.dims != dims:  # another model's vectors: as the CLI
            return _Vectors(generation, None)
        log.info("note vectors loaded: %d notes, generation %d", len(exact.paths), generation)
        return _Vectors(generation, exact)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size
