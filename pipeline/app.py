"""The composition root: the one place that opens KO-DB, the graph client and the model.

Every shell — each CLI command, sync, calibrate, freshness, eval, load-context, the
service, the hook and the MCP server — builds one ``App`` for its settings and takes its
stores from it; nothing else constructs a ``KoDB``, a ``GraphClient`` or an embedder. Each
resource is opened on first use (a degraded answer never opens the graph driver twice, a
sync with nothing to embed never loads the model) and closed by ``close``.

Two rules are built in, in ``_before_model_load``, which runs once, just before the model
(seconds of torch import and weights) is loaded:

1. KO-DB is opened first: with KO-DB unreachable a question fails in milliseconds with the
   KO-DB error instead of after loading the model;
2. the graph is checked next (one ping, bounded by the retry deadline): a dead graph
   fails, or sends the question to the fallback, before the model is loaded.

``pipeline()`` gives the Pipeline that answers over these stores; by default it sees the
vault without its private notes (``pipeline/privacy.py``). First opens are locked, so the
service's worker threads share one KO-DB engine, one Bolt driver and one model.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipeline import statefile
from pipeline.config import Settings
from pipeline.privacy import PrivateNotes, PublicGraph, PublicKodb

if TYPE_CHECKING:
    from pipeline.embed import Embedder, LazyEmbedder
    from pipeline.graph import GraphClient, LocalGraph
    from pipeline.graph.reader import GraphReader
    from pipeline.kodb import KoDB
    from pipeline.kodb.reader import KodbReader
    from pipeline.query import Pipeline
    from pipeline.rank import OrderRule

log = logging.getLogger(__name__)

#: The state file recording the KO-DB file that last passed an integrity check.
VERIFIED_FILE = "kodb-verified.json"
#: "no calibration seen yet" (None is a real value: nothing stored).
_UNSET: Any = object()


class App:
    """Settings and the long-lived resources of one vault, opened on first use."""

    def __init__(
        self,
        settings: Settings,
        *,
        kodb: KoDB | None = None,
        graph: GraphClient | None = None,
        embedder: Embedder | LazyEmbedder | None = None,
        on_model_load: Callable[[], None] | None = None,
        on_slow_load: Callable[[str], None] | None = None,
        torch_allowed: bool = True,
        creates_kodb: bool = True,
        verify_kodb: bool = True,
    ) -> None:
        self.settings = settings
        self._creates_kodb = creates_kodb
        self._verify_kodb = verify_kodb
        self._opened_kodb: KoDB | None = None  # opened (and verified) by this App
        self.private = PrivateNotes.from_settings(settings)
        self._kodb = kodb
        self._graph = graph
        self._embedder = embedder
        self._on_model_load = on_model_load
        self._on_slow_load = on_slow_load
        self._torch_allowed = torch_allowed
        self._lock = threading.RLock()
        self._views: dict[tuple[str, PrivateNotes], Any] = {}
        self._pipelines: dict[bool, Pipeline] = {}
        # The App whose stores a sharing one (``sharing``) reads through another view.
        self._owner: App | None = None
        self._calibration_seen: Any = _UNSET

    # -- the stores ----------------------------------------------------------------------
    @property
    def kodb(self) -> KoDB:
        """KO-DB (opened, and its schema migrated, on first use). An App of a command that
        only reads (``creates_kodb=False``: query, serve, hook, MCP, load-context, …) never
        makes one: a KO-DB that does not exist is a KodbError saying how to make it."""
        if self._kodb is None:
            with self._lock:
                if self._kodb is None:
                    from pipeline.kodb import KoDB

                    s = self.settings
                    db = KoDB.open(
                        s.effective_kodb_url,
                        create=self._creates_kodb,
                        base_dir=s.vault,
                        confine_to=s.state_dir,
                    )
                    try:
                        self._verify(db)
                    except BaseException:
                        db.close()
                        raise
                    self._opened_kodb = db
                    self._kodb = db
        return self._kodb

    def _verify(self, db: KoDB) -> None:
        """Rule 0: no command reads from or writes into a damaged KO-DB. A writer checks
        every time; a reader only when the file changed since the last check that passed
        (recorded in the state dir), so a cold question pays a stat, not a scan. The hook
        (``verify_kodb=False``) never scans: its budget is a second or so, and a damaged
        KO-DB fails its statements anyway (answered as nothing, and logged)."""
        stamp = db.file_stamp()
        if stamp is None or not self._verify_kodb:  # a server's database checks its own
            return
        if not self._creates_kodb and self._verified_stamp() == stamp:
            return
        db.check_integrity()
        self._record_verified(db)

    def _verified_stamp(self) -> Any:
        """The stamp the last check that passed recorded; None when there is none or it
        cannot be read (damaged, say by a sync tool copying the state dir): checked again."""
        try:
            return statefile.read_json(self.settings.state_dir / VERIFIED_FILE)
        except (OSError, ValueError) as exc:
            log.debug("KO-DB's check record cannot be read (%s): checking KO-DB again", exc)
            return None

    def _record_verified(self, db: KoDB) -> None:
        stamp = db.file_stamp()
        if stamp is None:
            return
        # A read-only state dir records nothing: the next reader checks again.
        with contextlib.suppress(OSError):
            statefile.write_json(self.settings.state_dir / VERIFIED_FILE, stamp)

    @property
    def graph(self) -> GraphClient:
        """The graph client (no network I/O until its first call)."""
        if self._graph is None:
            with self._lock:
                if self._graph is None:
                    from pipeline.graph.client import GraphClient

                    self._graph = GraphClient(self.settings)
        return self._graph

    @property
    def embedder(self) -> Embedder | LazyEmbedder:
        """The configured model, loaded on its first embed (after ``_before_model_load``)."""
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    from pipeline.embed import LazyEmbedder

                    self._embedder = LazyEmbedder(
                        self.settings,
                        before_load=self._before_model_load,
                        on_slow_load=self._on_slow_load,
                        torch_allowed=self._torch_allowed,
                    )
        return self._embedder

    @property
    def model_loaded(self) -> bool:
        """Whether the model is in memory (a degraded answer never loads it)."""
        emb = self._embedder
        return emb is not None and bool(getattr(emb, "is_loaded", True))

    def _before_model_load(self) -> None:
        self.kodb  # noqa: B018 - rule 1: KO-DB first (it raises KodbError when unreachable)
        self.graph.ping()  # rule 2: the graph next (GraphUnavailable within the deadline)
        if self._on_model_load is not None:
            self._on_model_load()

    def load_model(self, *, before_stores: bool = False) -> Embedder:
        """Load the model now (the service warms it at start). ``before_stores`` skips the
        two rules: eval sizes its throwaway graph by the model, so the model comes first."""
        emb = self.embedder
        load = getattr(emb, "load", None)
        if load is None:  # an Embedder given ready-made
            return emb  # type: ignore[return-value]
        return load(check=not before_stores)  # type: ignore[no-any-return]

    def local_graph(self, **kw: Any) -> LocalGraph:
        """The local ArcadeDB server of this state dir (`graph up / down / status`)."""
        from pipeline.graph.local import LocalGraph

        return LocalGraph(self.settings.state_dir, **kw)

    # -- what answers see ---------------------------------------------------------------
    def kodb_for(self, private: PrivateNotes) -> KodbReader:
        """KO-DB without the notes ``private`` names (KO-DB itself when it names none)."""
        view = self._view("kodb", private, lambda: PublicKodb(self.kodb, private))
        return view  # type: ignore[no-any-return]

    def graph_for(self, private: PrivateNotes) -> GraphReader:
        """The graph without the notes ``private`` names (the client when it names none)."""
        view = self._view("graph", private, lambda: PublicGraph(self.graph, private))
        return view  # type: ignore[no-any-return]

    def _view(self, kind: str, private: PrivateNotes, make: Callable[[], Any]) -> Any:
        if not private:
            return self.kodb if kind == "kodb" else self.graph
        key = (kind, private)
        if key not in self._views:
            with self._lock:
                self._views.setdefault(key, make())
        return self._views[key]

    def pipeline(
        self, *, include_private: bool = False, order: OrderRule | None = None
    ) -> Pipeline:
        """The Pipeline answering over these stores (one per ``include_private``, reused:
        its calibration basis is cached); private notes stay hidden unless asked for."""
        from pipeline.query import Pipeline

        if order is not None:
            return Pipeline(app=self, include_private=include_private, order=order)
        with self._lock:
            if include_private not in self._pipelines:
                self._pipelines[include_private] = Pipeline(
                    app=self, include_private=include_private
                )
            return self._pipelines[include_private]

    def sharing(self, *, kodb: KodbReader) -> App:
        """An App over another view of KO-DB (load-context's cache) that shares this one's
        graph client and model; closing it is this App's job. It answers and never writes,
        so the reader stands where the store would."""
        shared = App(
            self.settings,
            kodb=kodb,  # type: ignore[arg-type]
            graph=self.graph,
            embedder=self.embedder,
        )
        shared._owner = self
        return shared

    @property
    def store(self) -> KoDB:
        """KO-DB itself, whatever view this App answers through (a sharing App's is its
        owner's): what the registry's stamps are read from."""
        return self._owner.store if self._owner is not None else self.kodb

    def refresh_calibration(self) -> bool:
        """Drop the cached calibration basis when the stored calibration changed since the
        last look (one indexed read); True when it changed. The service calls it before
        each answer, so `vault-ko calibrate` takes effect without a restart."""
        emb = self.embedder
        cal = self.kodb.latest_calibration(emb.model_id, emb.dims)
        changed = self._calibration_seen is not _UNSET and cal != self._calibration_seen
        self._calibration_seen = cal
        if changed:
            for p in list(self._pipelines.values()):
                p.forget_calibration()
        return changed

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        """Close the graph driver and the KO-DB pool (idempotent; the model stays cached in
        the process)."""
        with self._lock:
            graph, kodb = self._graph, self._kodb
            self._graph = self._kodb = None
            opened, self._opened_kodb = self._opened_kodb, None
            self._views.clear()
            self._pipelines.clear()
        for res in (graph, kodb):
            if res is not None:
                res.close()
        if opened is not None and self._creates_kodb:
            # A writer trusts what it wrote itself, as the file is once closed (closing
            # the last connection moves the write-ahead log into it).
            self._record_verified(opened)

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
