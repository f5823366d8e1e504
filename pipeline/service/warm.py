"""The service's warm answers: what load-context does for a batch, kept across requests.

A warm `POST /query` spent most of its time in two places (examples/vault, this machine):
the graph's vector search (33 ms at best: the index query ships the candidates' embeddings
over Bolt) and the KO-DB statements of the bridge and the facts (25 ms). The service keeps

* the note vectors in memory (``batch/exact.py``'s ExactSearch: one matrix product per
  question), but only while the vault has no more notes than the index over-fetch
  (``graph_candidates``): then the index returns every note as a candidate and the exact
  search is the same search, so answers stay the CLI's to the last digit; a larger vault
  is searched on the index, as the CLI does;
* a memo of KO-DB reads (``batch/memo.py``'s CachedKodb), for a KO-DB in a SQLite file.

Both are dropped when what they copy changes: the SQLite file or its write-ahead log
(every commit touches one of them: ingest, import, calibrate), the stamp every graph write
of this vault's clients touches (``graph.client.changes_path``: embed, sync), and at the
latest after ``RELOAD_SECONDS`` (a writer using another state dir). With KO-DB on
PostgreSQL there is no such cheap check, so nothing is cached. The questions still go
through ``Pipeline.ask_many`` (the graph is checked first, so a graph down answers in
fallback as the CLI does), with the exact search as its batch search, as load-context does.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pipeline.app import App
from pipeline.errors import GraphError
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
    exact: Any | None  # ExactSearch, or None: the index answers
    loaded_at: float


class WarmAnswers:
    """Answers for the service, from a warm copy of the vault when that is safe."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._copy: _Copy | None = None

    def ask(self, question: str, opts: QueryOptions) -> Answer:
        copy = self._current()
        if copy is None:
            self.app.refresh_calibration()
            return self.app.pipeline().ask(question, opts)
        search = None
        if copy.exact is not None:
            exact, pipeline = copy.exact, copy.pipeline

            def search(vectors: Any, k: int) -> list[list[Hit]]:
                return exact.search_many(vectors, k, pipeline.index_search)  # type: ignore[no-any-return]

        return copy.pipeline.ask_many([question], opts, search=search)[0]

    # -- the copy -------------------------------------------------------------------------
    def signature(self) -> Signature | None:
        """What the copy depends on, read with a few ``stat`` calls; None: no cache."""
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
        from pipeline.batch.exact import ExactSearch
        from pipeline.batch.memo import CachedKodb

        base = self.app.pipeline()
        memo = CachedKodb(base.kodb)
        pipeline = Pipeline(app=self.app.sharing(kodb=memo), include_private=not base.private)
        exact = None
        if len(memo.notes()) <= self.app.settings.graph_candidates:
            try:
                exact = ExactSearch.load(pipeline.graph, memo)
            except GraphError as exc:  # down, or embeddings of several sizes: the index path
                log.info("no warm copy of the note vectors: %s", exc)
            dims = getattr(pipeline.embedder, "dims", None)
            if exact is not None and exact.paths and exact.dims != dims:
                exact = None
        return _Copy(signature, pipeline, exact, time.monotonic())


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size
