"""The query orchestrator: the only module that knows the order of the stages.

    graph check ─▶ embed ─▶ vector search ─▶ relevance ─▶ bridge ─▶ KO-DB facts ─▶ rank
         └─ graph unavailable / circuit open ─▶ term search on KO-DB ─▶ rank (mode fallback)

The graph is checked before the model is loaded, so a degraded answer never pays for
importing torch. CLI, service, hook and MCP call ``Pipeline.ask`` and render its Answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from pipeline import bridge
from pipeline.calibrate import Basis, assess, choose_basis
from pipeline.config import Settings
from pipeline.errors import ConfigError, GraphQueryError, GraphUnavailable
from pipeline.fallback_log import record_fallback
from pipeline.model import Answer, Fact, Hit, Relevance
from pipeline.rank import rank_subjects

if TYPE_CHECKING:
    from pipeline.embed import Embedder, LazyEmbedder
    from pipeline.graph import GraphClient
    from pipeline.kodb import KoDB


@dataclass(frozen=True)
class QueryOptions:
    """How much to return; presets (DESIGN §6) fill these in."""

    top_k: int = 20
    hits: int = 20
    facts_per_subject: int = 3
    facts_per_predicate_cap: int = 3
    semantic: bool = True
    preset: str | None = None
    crystal_only: bool = False
    subjects: bool = True  # routing returns notes only
    session_notes_only: bool = False  # episodic recall
    per_token: bool = False  # wiki-gap: every query word searched on its own

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> QueryOptions:
        base = cls(
            top_k=settings.query_top_k,
            hits=settings.query_hits,
            facts_per_subject=settings.query_facts_per_subject,
            facts_per_predicate_cap=settings.query_facts_per_predicate_cap,
        )
        preset = overrides.get("preset")
        if preset:
            if preset not in PRESETS:
                raise ConfigError(
                    f"unknown preset {preset!r}; choose one of {', '.join(sorted(PRESETS))}"
                )
            base = replace(base, preset=preset, **PRESETS[preset])
        explicit = {k: v for k, v in overrides.items() if v is not None and k != "preset"}
        for name, value in explicit.items():
            if name in ("top_k", "hits", "facts_per_subject") and value < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must not be negative")
        return replace(base, **explicit)


#: The seed's table of Top-K strategies (DESIGN §6).
PRESETS: Final[dict[str, dict[str, Any]]] = {
    "session": {"top_k": 20, "facts_per_subject": 3},
    "wiki-gap": {"top_k": 30, "per_token": True},
    "crystallize": {"top_k": 5, "crystal_only": True},
    "routing": {"hits": 3, "subjects": False},
    "episodic": {"hits": 3, "session_notes_only": True},
}

#: How many notes episodic recall looks through to find three session notes.
EPISODIC_SCAN: Final = 100


class Timer:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = round(self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1e3, 3)


class Pipeline:
    """Long-lived resources (KO-DB, graph driver, model) and the query stages over them."""

    def __init__(
        self,
        settings: Settings,
        *,
        kodb: KoDB | None = None,
        graph: GraphClient | None = None,
        embedder: Embedder | LazyEmbedder | None = None,
    ) -> None:
        self.settings = settings
        self._kodb = kodb
        self._graph = graph
        self._embedder = embedder
        self._basis: Basis | None = None

    # -- resources, opened on first use ------------------------------------------------
    @property
    def kodb(self) -> KoDB:
        if self._kodb is None:
            from pipeline.kodb import KoDB

            self._kodb = KoDB.open(self.settings.effective_kodb_url)
        return self._kodb

    @property
    def graph(self) -> GraphClient:
        if self._graph is None:
            from pipeline.graph import open_graph

            self._graph = open_graph(self.settings)
        return self._graph

    @property
    def embedder(self) -> Embedder | LazyEmbedder:
        if self._embedder is None:
            from pipeline.embed import LazyEmbedder

            # Loaded on the first embed: labels, syncs and fallbacks need only its id.
            self._embedder = LazyEmbedder(self.settings)
        return self._embedder

    def basis(self) -> Basis:
        """Which calibration labels answers (cached: one lookup per process)."""
        if self._basis is None:
            emb = self.embedder
            cal = self.kodb.latest_calibration(emb.model_id, emb.dims)
            self._basis = choose_basis(cal, emb.model_id, emb.dims)
        return self._basis

    def forget_calibration(self) -> None:
        self._basis = None

    def close(self) -> None:
        for res in (self._graph, self._kodb):
            if res is not None:
                res.close()
        self._graph = self._kodb = None

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the stages ---------------------------------------------------------------------
    def ask(self, text: str, options: QueryOptions | None = None) -> Answer:
        """Answer one question: semantic when the graph answers, else degraded."""
        opts = options or QueryOptions.from_settings(self.settings)
        text = text.strip()
        if not text:
            raise ConfigError("the question is empty")
        timer = Timer()
        t0 = time.perf_counter()
        if not opts.semantic:
            answer = self.fallback_answer(
                text, opts, timer, "semantic search disabled (--no-semantic)"
            )
        else:
            try:
                with timer.stage("graph_check_ms"):
                    self.graph.ping()
                answer = self._semantic(text, opts, timer)
            except GraphUnavailable as exc:
                answer = self.fallback_answer(text, opts, timer, f"graph unavailable: {exc}")
            except GraphQueryError as exc:  # e.g. a missing Cypher file, an old server
                answer = self.fallback_answer(text, opts, timer, f"graph error: {exc}")
        timer.ms["total_ms"] = round((time.perf_counter() - t0) * 1e3, 3)
        return replace(answer, timings_ms=dict(timer.ms))

    def _semantic(self, text: str, opts: QueryOptions, timer: Timer) -> Answer:
        with timer.stage("embed_ms"):
            vector = self.embedder.embed([text])[0]
        return self.answer_from_vector(text, vector, opts, timer, search=self.index_search)

    def index_search(self, vector: Any, k: int) -> list[Hit]:
        """The graph's vector search (over-fetch + exact re-score) as pipeline Hits."""
        return [
            Hit(h.path, h.title, h.source_type, h.cosine)  # type: ignore[arg-type]
            for h in self.graph.vector_search(vector, k)
        ]

    def answer_from_vector(
        self,
        text: str,
        vector: Any,
        opts: QueryOptions,
        timer: Timer,
        *,
        search: Callable[[Any, int], list[Hit]],
    ) -> Answer:
        """Stages 2-5 for an embedded question; ``search`` may be a batch searcher."""
        k = max(opts.hits, EPISODIC_SCAN) if opts.session_notes_only else opts.hits
        with timer.stage("graph_ms"):
            hits = search(vector, k)
        if opts.session_notes_only:
            hits = [h for h in hits if h.source_type == "session"]
        hits = hits[: opts.hits]
        with timer.stage("kodb_ms"):
            basis = self.basis()
        relevance = assess(hits[0].cosine if hits else None, basis)
        if relevance.label == "no_match" or not opts.subjects or opts.top_k == 0:
            return Answer(text, "semantic", None, relevance, tuple(hits), ())
        with timer.stage("kodb_ms"):
            floor = relevance.floor_cosine
            if opts.session_notes_only:
                candidates = {}
                by_file = self.kodb.subjects_by_source_file([h.path for h in hits])
                for h in hits:
                    for s in by_file.get(h.path, ()):
                        candidates[s] = max(candidates.get(s, h.cosine), h.cosine)
            else:
                candidates = bridge.semantic_candidates(hits, floor, self.kodb)
            if opts.per_token:
                for s in bridge.term_candidates(text, self.kodb):
                    candidates.setdefault(s, None)  # type: ignore[arg-type]
            facts = self.kodb.facts_for_subjects(candidates)
            if opts.session_notes_only:
                files = {h.path for h in hits}
                facts = [f for f in facts if f.source_file in files]
        subjects = self._rank(facts, opts, candidates, timer)
        return Answer(text, "semantic", None, relevance, tuple(hits), subjects)

    def fallback_answer(self, text: str, opts: QueryOptions, timer: Timer, reason: str) -> Answer:
        """Degraded mode: term search on KO-DB, ranked the same way; never loads the model.

        Public so that batch callers (load-context, eval) answer exactly like ``ask``."""
        subjects: tuple = ()
        if opts.subjects and opts.top_k:
            with timer.stage("kodb_ms"):
                candidates = bridge.term_candidates(text, self.kodb)
                facts = self.kodb.facts_for_subjects(candidates)
            subjects = self._rank(facts, opts, {}, timer)
        record_fallback(self.settings.state_dir, reason)
        relevance = Relevance(
            "unscored",
            None,
            None,
            None,
            None,
            None,
            "none",
            False,
            None,
            "degraded mode: subjects found by word search on KO-DB, not by meaning",
        )
        return Answer(text, "fallback", reason, relevance, (), subjects)

    def _rank(
        self, facts: list[Fact], opts: QueryOptions, best: dict[str, Any], timer: Timer
    ) -> tuple:
        with timer.stage("rank_ms"):
            return tuple(
                rank_subjects(
                    facts,
                    top_k=opts.top_k,
                    facts_per_subject=opts.facts_per_subject,
                    facts_per_predicate_cap=opts.facts_per_predicate_cap,
                    best_cosine={k: v for k, v in best.items() if v is not None},
                    crystal_only=opts.crystal_only,
                )
            )
