"""The query orchestrator: the only module that knows the order of the stages.

    graph check ─▶ embed ─▶ vector search ─▶ relevance ─▶ bridge ─▶ KO-DB summaries ─▶ rank
         └─ graph unavailable / circuit open ─▶ word search on KO-DB ─▶ rank (mode fallback)

One answer path serves one question (``Pipeline.ask``) and a batch (``Pipeline.ask_many``,
which load-context and eval use with their own batch search): the graph is checked before
the model is loaded, so a degraded answer never pays for importing torch; questions are
embedded and searched together, then each is answered on its own hits. CLI, service, hook
and MCP call ``ask`` and render its Answer.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date
from typing import TYPE_CHECKING, Any, Final, Protocol

from pipeline import bridge
from pipeline.calibrate import Basis, assess, band_of, choose_basis
from pipeline.config import Settings
from pipeline.errors import (
    ConfigError,
    GraphError,
    GraphQueryError,
    GraphUnavailable,
    InputError,
    ModelUnavailable,
    VaultKoError,
)
from pipeline.fallback_log import record_fallback
from pipeline.fusion import DENSE_WEIGHT, relative_scores
from pipeline.model import (
    WORD_POOL,
    WORDS_ASKED,
    Answer,
    Candidate,
    Hit,
    Note,
    NoteStamp,
    Recency,
    Relevance,
    SubjectRank,
    SubjectSummary,
    TimeWindow,
    UnsyncedEdits,
    clean_text,
    normalize_text,
)
from pipeline.noisefloor import profile_for
from pipeline.privacy import PrivateNotes, redact
from pipeline.rank import DEFAULT_ORDER, WHO, OrderRule, rank_summaries
from pipeline.render import NOTES_SHOWN
from pipeline.succession import Succession, order_with_successors
from pipeline.timewindow import (
    RECENT_TIER_SIGMAS,
    apply_window,
    asks_latest,
    newest_first,
    parse_window,
    recent_first,
    topic_words,
    without_latest,
)

if TYPE_CHECKING:
    import numpy as np

    from pipeline.app import App
    from pipeline.embed import Embedder, LazyEmbedder
    from pipeline.graph import GraphClient
    from pipeline.kodb.reader import KodbReader

log = logging.getLogger(__name__)


#: The most subjects, notes or facts per subject any surface may ask for: past it numbers
#: only overflow the stores (2**63 reached SQLite as an OverflowError).
MAX_COUNT = 10_000


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
    retrieval: str = "hybrid"  # hybrid | dense (RETRIEVALS); Settings' default too
    today: str | None = None  # ISO day time phrases are read against (None: today)
    excerpts: bool = True  # each hit's excerpt is the part of its note meeting the question
    newest_first: bool = True  # a question asking for the latest gets its newest notes first
    word_matches: bool = True  # no_match and weak answers name few notes holding all its words

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> QueryOptions:
        base = cls(
            top_k=settings.query_top_k,
            hits=settings.query_hits,
            facts_per_subject=settings.query_facts_per_subject,
            facts_per_predicate_cap=settings.query_facts_per_predicate_cap,
            retrieval=settings.query_retrieval,
            today=settings.query_today.strip() or None,
            newest_first=settings.query_latest == "newest",
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
            # Named as QueryOptions, the API and the MCP tools name them (the CLI's own
            # ranges answer for its flags before this).
            if name in ("top_k", "hits", "facts_per_subject") and value < 0:
                raise ConfigError(f"{name} must be at least 0")
            if name in ("top_k", "hits", "facts_per_subject") and value > MAX_COUNT:
                raise ConfigError(f"{name} must be at most {MAX_COUNT}")
        chosen = replace(base, **explicit)
        if chosen.retrieval not in RETRIEVALS:
            raise ConfigError(
                f"unknown retrieval {chosen.retrieval!r} (setting query_retrieval); "
                f"choose {' or '.join(RETRIEVALS)}"
            )
        return chosen


#: The seed's table of Top-K strategies (DESIGN §6).
PRESETS: Final[dict[str, dict[str, Any]]] = {
    "session": {"top_k": 20, "facts_per_subject": 3},
    "wiki-gap": {"top_k": 30, "per_token": True},
    "crystallize": {"top_k": 5, "crystal_only": True},
    "routing": {"hits": 3, "subjects": False},
    "episodic": {"hits": 3, "session_notes_only": True},
}

#: The most notes holding every word of the question that an answer names (``_pointed``):
#: a no_match the best of all it counts; a weak answer only when at most this many hold
#: them, since beside the notes it shows more would pick nothing out. Three, as a pointer is
#: read in one line.
WORD_MATCHES: Final = 3
#: With a code in the question ("X-15"), the notes holding its parts that are read for the
#: code as written (``Pipeline._holds_codes``), at least: a no_match reads ``WORD_POOL`` + 1,
#: so its count of a code's notes is of those among them.
CODE_POOL: Final = 50
#: How many notes episodic recall looks through to find three session notes.
EPISODIC_SCAN: Final = 100
#: A word held by at least this share of the vault's notes picks none of them out ("TSC" in
#: the TSC's minutes, 0.90; the most held topic word of the judged examples-vault questions,
#: "cache", 0.52): beside a period or the latest it names no topic (``Pipeline.names_topic``).
VAULT_WIDE_SHARE: Final = 0.8
#: Hybrid retrieval fuses at least this many notes of each ranking, then keeps the hits asked
#: for: fused over the first few only, a note one ranking places just past the cut loses
#: that ranking's vote (docs/degraded-mode.md, "Hybrid retrieval").
FUSE_DEPTH: Final = 100
#: dense: the graph's vector search; hybrid: it and KO-DB's full-text search, fused by
#: their relative scores (fusion.py).
RETRIEVALS: Final = ("dense", "hybrid")

#: batch_search(vectors, k) -> each question's hits, best first, in order (load-context's
#: exact search); an iterator, so the hits found before the graph fails are still answered.
BatchSearch = Callable[["np.ndarray", int], Iterable[Sequence[Hit]]]


class BatchPrefetch(Protocol):
    """A batch's chance to warm its KO-DB cache before the answers are made."""

    def semantic(self, found: Sequence[Sequence[Hit]], basis: Basis) -> None:
        """Before semantic answers: every question's hits, best first."""
        ...

    def words(self, questions: Sequence[str]) -> None:
        """Before degraded answers: the questions answered by word search."""
        ...


def cosine_of(vector: Any, embedding: Sequence[float]) -> float:
    """The exact cosine of a query vector and a stored embedding (float64, 0 for a zero)."""
    import numpy as np

    q = np.asarray(vector, dtype=np.float64)
    e = np.asarray(embedding, dtype=np.float64)
    norms = float(np.linalg.norm(q) * np.linalg.norm(e))
    return float(np.dot(q, e) / norms) if norms > 0 and q.shape == e.shape else 0.0


def degraded_reason(exc: GraphError) -> str:
    """Why an answer is degraded, in words: the graph is unreachable, or it refused (a
    missing Cypher file, a server too old, a refused query vector); either way the question
    is answered from the notes' words. The driver's text goes to the log (``-v``)."""
    from pipeline.graph.reason import in_words, retry_words

    log.info("the graph failed, answering from the notes' words: %s", exc)
    parts = (in_words(exc), "answering from the notes' words", retry_words(exc))
    return "; ".join(p for p in parts if p)


class Timer:
    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, (time.perf_counter() - t0) * 1e3)

    def add(self, name: str, ms: float) -> None:
        self.ms[name] = round(self.ms.get(name, 0.0) + ms, 3)


def _about(
    shown: Sequence[Hit],
    window: TimeWindow | None,
    recency: Recency | None,
    floor: float | None,
    today: str,
    topic: bool,
) -> tuple[Sequence[Hit], float | None]:
    """The hits subjects are found through, and the floor they must clear. A question
    about its period alone ("what did we decide last month?") or about the latest alone
    ("what happened at the last meeting?") has no topic for the floor to judge: the notes
    dated in the period, or the notes found dated up to ``today``, are what it asks for."""
    if window is not None and window.applied and not topic:
        return [h for h in shown if h.date is not None and window.holds(h.date)], None
    dated = [h for h in shown if _dated_by(h, today)]
    if recency is not None and recency.within_sigma is None and dated:
        return dated, None
    return shown, floor


def _dated_by(hit: Hit, today: str) -> bool:
    """Whether the hit's note is dated, and not after ``today``."""
    return hit.date is not None and hit.date <= today


def _holds_text(note: Note | None) -> bool:
    """Whether a hit's note holds more than its name. An empty file (what Obsidian makes
    when an unresolved link is clicked) is embedded and indexed as its title alone: every
    question naming it found it, labelled strong, and its answer said nothing."""
    return note is None or note.bytes > 0


def _with_note(hit: Hit, note: Note | None) -> Hit:
    """The hit with what the registry knows of its note: its summary and its date."""
    if note is None:
        return hit
    return replace(hit, excerpt=note.summary, date=note.date)


def _marked_hits(hits: Sequence[Hit], succession: Succession) -> list[Hit]:
    """The hits with their decisions' status and successor's note (succession.py)."""
    by_path = succession.by_path
    return [
        replace(h, status=d.status, superseded_by=d.successor_path)
        if (d := by_path.get(h.path)) is not None
        else h
        for h in hits
    ]


class Pipeline:
    """The query stages over the resources of an ``App`` (the composition root, which
    opens KO-DB, the graph and the model on first use); answers never see private notes
    unless ``include_private``."""

    def __init__(
        self,
        app: App,
        *,
        order: OrderRule = DEFAULT_ORDER,
        include_private: bool = False,
    ) -> None:
        self.app = app
        self.settings = app.settings
        self.private = PrivateNotes() if include_private else app.private
        self._basis: Basis | None = None
        # The last comparison of the vault with KO-DB and when it was made (monotonic); one
        # thread makes the next while the others wait for it (a scan each would pile up).
        self._edits_seen: tuple[float, Any] | None = None
        self._edits_lock = threading.Lock()
        self.embed_batches = 0  # model forward batches run for questions (load-context reports)
        self.order = order  # which candidates are comparable (rank.OrderRule)

    # -- resources: the App's, as answers may see them -------------------------------------
    @property
    def kodb(self) -> KodbReader:
        return self.app.kodb_for(self.private)

    @property
    def graph(self) -> GraphClient:
        return self.app.graph_for(self.private)  # type: ignore[no-any-return]

    @property
    def embedder(self) -> Embedder | LazyEmbedder:
        return self.app.embedder

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
        self.app.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the one answer path ------------------------------------------------------------
    def ask(
        self, text: str, options: QueryOptions | None = None, *, check_edits: bool = False
    ) -> Answer:
        """Answer one question: semantic when the graph answers, else degraded."""
        return self.ask_many([text], options, check_edits=check_edits)[0]

    def ask_many(
        self,
        texts: Sequence[str],
        options: QueryOptions | None = None,
        *,
        search: BatchSearch | None = None,
        prefetch: BatchPrefetch | None = None,
        graph_checked: bool = False,
        check_edits: bool = False,
        edits_reuse_s: float = 0.0,
        sources: Sequence[str | None] | None = None,
    ) -> list[Answer]:
        """Answer several questions, in order, each exactly as ``ask`` would.

        One graph check (skipped with ``graph_checked``: the caller has just had an answer
        from the graph, as the service's generation read is); the questions are embedded
        together (batch-invariant, so each vector equals its single embedding) and searched
        by ``search`` (default: one index query each); ``prefetch`` may then warm KO-DB for
        all of them. When the graph is unreachable, before or during the search, every
        question not yet answered is answered in degraded mode with the reason. Each
        answer's ``timings_ms`` holds its own stages plus an equal share of the batch's.
        ``check_edits`` (a process that answers once, cold): compare the vault on disk with
        KO-DB's registry, so each answer says how many notes it cannot see yet; a
        long-lived process (the service without a watcher) reuses a comparison made within
        ``edits_reuse_s`` seconds. ``sources``: the note each question is the text of
        (load-context's note lines), which its answer leaves out: a note's nearest note is
        itself (cosine 1), and it would be the answer and its label every time.
        """
        opts = options or QueryOptions.from_settings(self.settings)
        questions = [clean_text(t).strip() for t in texts]
        if any(not q for q in questions):
            raise ConfigError("the question is empty")
        t0 = time.perf_counter()
        shared = Timer()
        timers = [Timer() for _ in questions]
        answers: list[Answer | None] = [None] * len(questions)
        reason = None if opts.semantic else WORDS_ASKED
        # A fresh process reads the model while the graph is asked; not when the graph will
        # fail at once (stopped, or its circuit open) nor for a word search.
        if reason is None and (graph_checked or not self._fails_fast()):
            preload = getattr(self.embedder, "preload", None)
            if callable(preload):
                preload()
        if reason is None and questions and not graph_checked:
            try:
                with shared.stage("graph_check_ms"):
                    self.graph.ping()
            except (GraphUnavailable, GraphQueryError) as exc:
                reason = degraded_reason(exc)
        # A question without content words is about nothing, in either mode (silence).
        for i, q in enumerate(questions):
            if not bridge.content_words(q):
                answers[i] = self._no_content(q, reason)
        todo = [i for i, a in enumerate(answers) if a is None]
        topics: dict[str, bool] = {}  # names_topic of each question, read once
        if reason is None and todo:
            found, lost = self._search([questions[i] for i in todo], opts, shared, search, topics)
            if lost is not None:  # the graph went away: what was found is still answered
                reason = lost
            if prefetch is not None and found:
                with shared.stage("kodb_ms"):
                    prefetch.semantic(found, self.basis())
            for i, hits in zip(todo, found, strict=False):
                if sources is not None and sources[i] is not None:
                    hits = [h for h in hits if h.path != sources[i]]
                answers[i] = self.answer_from_hits(questions[i], hits, opts, timers[i], topics)
            todo = todo[len(found) :]
        if reason is not None and todo:
            if prefetch is not None:
                with shared.stage("kodb_ms"):
                    prefetch.words([questions[i] for i in todo])
            for i in todo:
                source = None if sources is None else sources[i]
                answers[i] = self.fallback_answer(
                    questions[i], opts, timers[i], reason, topics, leave_out=source
                )
        edits = edits_reuse_s if check_edits else None
        return self._finished(answers, timers, shared, t0, edits_reuse_s=edits)

    def _finished(
        self,
        answers: Sequence[Answer | None],
        timers: Sequence[Timer],
        shared: Timer,
        t0: float,
        *,
        edits_reuse_s: float | None,
    ) -> list[Answer]:
        """The answers as they leave: each with its share of the batch's timings, what it
        cannot see of the vault on disk (unless ``edits_reuse_s`` is None), and no private
        note."""
        unsynced = stamps = None
        if edits_reuse_s is not None:
            # In a thread beside the graph's connect it cost more: both are Python work.
            with shared.stage("edits_ms"):
                unsynced, stamps = self._unsynced_edits(edits_reuse_s)
        total = (time.perf_counter() - t0) * 1e3
        out = []
        for answer, timer in zip(answers, timers, strict=True):
            assert answer is not None
            for name, ms in shared.ms.items():
                timer.add(name, ms / len(answers))
            timer.ms["total_ms"] = round(total / len(answers), 3)
            answer = replace(answer, timings_ms=dict(timer.ms), unsynced=unsynced)
            if stamps is not None:
                answer = self._marked_since_sync(answer, stamps)
            out.append(redact(answer, self.private))
        return out

    def _marked_since_sync(self, answer: Answer, stamps: Mapping[str, NoteStamp]) -> Answer:
        """``answer`` with each note whose file was edited or deleted since the last sync
        marked so (a stat per note shown; a read for one whose stamp moved)."""
        from pipeline.vault.edits import since_sync

        edits = answer.unsynced
        # A note edited into one sync cannot read is counted unreadable, not in total.
        if not (edits and (edits.total or edits.unreadable)) or not answer.hits:
            return answer
        changed = since_sync(self.settings, stamps, (h.path for h in answer.hits))
        if not changed:
            return answer
        hits = tuple(
            replace(h, since_sync=changed[h.path]) if h.path in changed else h for h in answer.hits
        )
        return replace(answer, hits=hits)

    def _fails_fast(self) -> bool:
        """Whether a call to the graph would fail without a round trip (the local graph
        is not running, or the circuit is open): the graph check then says why."""
        gate = getattr(self.app.graph, "circuit_open_reason", None)  # fakes may have none
        return callable(gate) and gate() is not None

    def _unsynced_edits(
        self, reuse_s: float = 0.0
    ) -> tuple[UnsyncedEdits | None, Mapping[str, NoteStamp] | None]:
        """The vault's notes edited since the last sync (counts over every note, private ones
        included, as no path is told), and the registry's stamps they were compared with,
        or those of a comparison made within ``reuse_s`` seconds; (None, None) when the
        comparison failed, which never costs the answer."""
        from pipeline.vault.edits import unsynced_edits

        with self._edits_lock:
            now = time.monotonic()
            seen = self._edits_seen
            if seen is not None and now - seen[0] < reuse_s:
                return seen[1]  # type: ignore[no-any-return]
            try:
                stamps = self.app.store.note_stamps()
                result = unsynced_edits(self.settings, stamps), stamps
            except (VaultKoError, OSError) as exc:
                log.warning("could not compare the vault with KO-DB for unsynced edits: %s", exc)
                return None, None
            self._edits_seen = (now, result)
            return result

    def _search(
        self,
        questions: Sequence[str],
        opts: QueryOptions,
        shared: Timer,
        search: BatchSearch | None,
        topics: dict[str, bool] | None = None,
    ) -> tuple[list[list[Hit]], str | None]:
        """Embed and search the questions: the hits of the first ones, and why the search
        stopped (then the rest were not searched and are answered degraded)."""
        from pipeline.embed import embed_prompts

        try:
            with shared.stage("embed_ms"):
                # Loading the model checks the graph once more (App's rule): it may be gone.
                vectors, batches = embed_prompts(self.embedder, questions)
        except (GraphUnavailable, GraphQueryError) as exc:
            return [], degraded_reason(exc)
        except ModelUnavailable as exc:  # a process that must not load torch (the hook)
            return [], str(exc)
        self.embed_batches += batches
        # Each question searched as deep as it would be alone: a batch's answers never
        # depend on the other questions in it (how deep hybrid fuses moves its order).
        ks = [self._depth(q, opts) for q in questions]
        hybrid = opts.retrieval == "hybrid"
        depths = [max(k, FUSE_DEPTH) if hybrid else k for k in ks]
        found: list[list[Hit]] = []
        lost = None
        with shared.stage("graph_ms"):
            try:
                for start, end in _runs(depths):
                    part, depth = vectors[start:end], depths[start]
                    if search is not None:
                        rows = search(part, depth)
                    else:
                        rows = (self.index_search(v, depth) for v in part)
                    for hits in rows:  # lazily: what was found before a failure is kept
                        found.append(list(hits))
            except (GraphUnavailable, GraphQueryError) as exc:
                lost = degraded_reason(exc)
        if hybrid:  # the questions searched (before a failure), fused
            found, failed = self._fuse_all(questions, vectors, found, ks, depths, shared, opts)
            lost = lost or failed
        if lost is None:  # the graph that just failed would not score them either
            found = self._dated_all(questions, vectors, found, shared, opts, topics)
        return found, lost

    def _depth(self, question: str, opts: QueryOptions) -> int:
        """How many hits a question keeps: those shown, or ``EPISODIC_SCAN`` when it asks
        for a period or the latest, or for session notes only (picked from more)."""
        scan = (
            opts.session_notes_only
            or self.window_of(question, opts) is not None
            or self.latest_of(question, opts) is not None
        )
        return max(opts.hits, EPISODIC_SCAN) if scan else opts.hits

    def _dated_all(
        self,
        questions: Sequence[str],
        vectors: Any,
        found: list[list[Hit]],
        shared: Timer,
        opts: QueryOptions,
        topics: dict[str, bool] | None = None,
    ) -> list[list[Hit]]:
        """Each searched question's hits with the notes it asks for by their dates
        (``_dated``). Once the graph fails to score them, the rest keep their search's
        hits (still a semantic answer; the failure is logged, and the graph's next call
        judges it)."""
        out: list[list[Hit]] = []
        for q, v, hits in zip(questions, vectors, found, strict=False):
            try:
                out.append(self._named(q, v, self._dated(q, v, hits, shared, opts, topics), shared))
            except (GraphUnavailable, GraphQueryError) as exc:
                log.warning("the notes asked for by their dates were not scored: %s", exc)
                return out + found[len(out) :]
        return out

    def names_topic(
        self, text: str, opts: QueryOptions, topics: dict[str, bool] | None = None
    ) -> bool:
        """Whether a question names a topic besides its period's phrase and the words asking
        for the latest: a word other than stop words and ``PERIOD_ONLY_WORDS`` that fewer
        than ``VAULT_WIDE_SHARE`` of the vault's notes hold (one nearly every note holds
        picks none out: "the most recent TSC meeting" in the TSC's minutes is the last
        meeting). A question naming neither is all topic. Remembered in ``topics`` (one
        batch's questions) when given."""
        if topics is not None and text in topics:
            return topics[text]
        window = self.window_of(text, opts)
        latest = self.latest_of(text, opts)
        topic = True
        if window is not None or latest is not None:
            topic = bool(self._picking_out(_topical(text, window, latest)))
        if topics is not None:
            topics[text] = topic
        return topic

    def _picking_out(self, words: Sequence[str]) -> list[str]:
        """Those of ``words`` that pick notes out: fewer than ``VAULT_WIDE_SHARE`` of the
        vault's notes hold them (one read of KO-DB for all)."""
        shares = self.kodb.word_shares(words) if words else {}
        return [w for w in words if shares.get(w, 0.0) < VAULT_WIDE_SHARE]

    def days_asked(
        self, text: str, opts: QueryOptions, topics: dict[str, bool] | None = None
    ) -> tuple[str | None, str] | None:
        """The days a question about its period alone ("what happened in March 2026?") or
        the latest alone ("what happened at the last meeting?") asks for: its period's first
        and last, or (None, today); and the day a question names, topic or not ("who
        attended the meeting on 2026-04-01?": that day's notes are the few it means). None
        when it names a topic and a longer period, or no time."""
        window = self.window_of(text, opts)
        latest = self.latest_of(text, opts)
        if window is None and latest is None:
            return None
        if window is not None and window.start == window.end:
            return window.start, window.end
        if self.names_topic(text, opts, topics):
            return None
        today = self.today_of(opts).isoformat()
        if window is None:
            return None, today
        # A note dated after today is no last meeting, nor what a period so far holds (a
        # period wholly ahead, "next week", keeps its end: its notes are plans).
        end = min(window.end, today) if window.start <= today else window.end
        return window.start, end

    def _dated(
        self,
        text: str,
        vector: Any,
        hits: list[Hit],
        shared: Timer,
        opts: QueryOptions,
        topics: dict[str, bool] | None = None,
    ) -> list[Hit]:
        """``hits`` and, for a question about its period or the latest alone, the newest
        notes dated in what it asks for (``days_asked``) that the search did not reach, each
        with its exact cosine, placed by it: a question without a topic is answered by
        dates, and the notes nearest its words ("what happened") need not hold them."""
        with shared.stage("kodb_ms"):
            days = self.days_asked(text, opts, topics)
            dated = self._notes_in(days, opts)
        have = {h.path for h in hits}
        missing = {n.path: n for n in dated if n.path not in have}
        if not missing:
            return hits
        out = list(hits)
        # Each after the last hit at least as close: in dense order that is its place by
        # cosine, and in hybrid's fused order no note fused above it is passed.
        for extra in sorted(self._scored(vector, missing, shared), key=lambda h: -(h.cosine or 0)):
            at = max(
                (
                    i + 1
                    for i, h in enumerate(out)
                    if h.cosine is not None and h.cosine >= extra.cosine
                ),
                default=0,
            )
            out.insert(at, extra)
        return out

    def _named(self, text: str, vector: Any, hits: list[Hit], shared: Timer) -> list[Hit]:
        """``hits`` led by the decision records the question names by number ("is ADR 12
        still current?"), each with its exact cosine, in the order named: the words and the
        meaning of "ADR 12" find any record before the twelfth."""
        numbers = bridge.record_numbers(text)
        if not numbers:
            return hits
        with shared.stage("kodb_ms"):
            named = {
                path: note
                for path, note in self.kodb.notes().items()
                if note.source_type == "adr" and bridge.record_number(path) in numbers
            }
        if not named:
            return hits
        scored = self._scored(vector, named, shared)
        scored.sort(key=lambda h: (numbers.index(bridge.record_number(h.path) or 0), h.path))
        return scored + [h for h in hits if h.path not in named]

    def _notes_in(self, days: tuple[str | None, str] | None, opts: QueryOptions) -> list[Note]:
        """The newest notes dated in ``days`` (``days_asked``; None: none), as many as the
        hits shown, session notes only for episodic recall."""
        if days is None:
            return []
        kind = "session" if opts.session_notes_only else None
        return self.kodb.notes_dated(*days, opts.hits, kind)

    def _scored(self, vector: Any, notes: Mapping[str, Note], shared: Timer) -> list[Hit]:
        """These notes as hits scored exactly against their stored vectors, as the vector
        search scores them (their own, or a long note's best passage); a note without a
        stored vector is left out."""
        from pipeline.graph.scoring import note_score  # numpy: not on the degraded path

        with shared.stage("graph_ms"):
            stored = self.graph.note_vector_sets(list(notes))
        out = []
        for path, note in notes.items():
            if path in stored:
                own, *parts = (cosine_of(vector, v) for v in stored[path])
                out.append(Hit(path, note.title, note.source_type, note_score(own, parts)))
        return out

    def _fuse_all(
        self,
        questions: Sequence[str],
        vectors: Any,
        found: list[list[Hit]],
        ks: Sequence[int],
        depths: Sequence[int],
        shared: Timer,
        opts: QueryOptions,
    ) -> tuple[list[list[Hit]], str | None]:
        """Each searched question's hits fused (``_fuse``, each at its own ``ks`` and
        ``depths``), in order, until the graph fails: the questions fused before it, and why
        (the rest are answered degraded)."""
        fused: list[list[Hit]] = []
        for q, v, dense, k, depth in zip(questions, vectors, found, ks, depths, strict=False):
            try:
                fused.append(self._fuse(q, v, dense, k, depth, shared, opts))
            except (GraphUnavailable, GraphQueryError) as exc:
                return fused, degraded_reason(exc)
        return fused, None

    def _fuse(
        self,
        question: str,
        vector: Any,
        dense: list[Hit],
        k: int,
        depth: int,
        shared: Timer,
        opts: QueryOptions,
    ) -> list[Hit]:
        """Hybrid retrieval: the first ``depth`` dense hits and full-text hits fused by
        their relative scores, the first ``k`` kept; every fused hit gets its exact cosine (a
        words-only one against its stored embedding), so labels and tiers stay cosine."""
        with shared.stage("fulltext_ms"):
            words = self.kodb.search_notes(self.terms_of(question, opts), depth)
        scored = [(h.path, h.cosine or 0.0) for h in dense]
        unread = self._unread({p for p, _ in scored} | {p for p, _ in words}, shared)
        order = relative_scores([scored, words], [DENSE_WEIGHT, 1.0 - DENSE_WEIGHT], unread)
        by_path = {h.path: h for h in dense}
        bm25 = dict(words)
        missing = [p for p in order[:k] if p not in by_path]
        if missing:
            by_path |= {
                h.path: h for h in self._scored(vector, self.kodb.notes_at(missing), shared)
            }
        # A words-only note without a stored vector is left out; the next fused one fills in.
        return [
            replace(by_path[p], bm25=bm25.get(p), unread=p in unread and p in bm25)
            for p in order
            if p in by_path
        ][:k]

    def _unread(self, paths: set[str], shared: Timer) -> set[str]:
        """Those of ``paths`` written in a language the model does not read (its profile's
        ``reads``; an unprofiled model or a note indexed without stemming reads as read)."""
        profile = profile_for(self.embedder.model_id)
        if profile is None or profile.reads is None or not paths:
            return set()
        with shared.stage("kodb_ms"):
            languages = self.kodb.note_languages(paths)
        reads = profile.reads
        return {p for p, lang in languages.items() if lang is not None and lang not in reads}

    def index_search(self, vector: Any, k: int) -> list[Hit]:
        """The graph's vector search (over-fetch + exact re-score) as pipeline Hits."""
        return [
            Hit(h.path, h.title, h.source_type, h.cosine)  # type: ignore[arg-type]
            for h in self.graph.vector_search(vector, k)
        ]

    def answer_from_hits(
        self,
        text: str,
        hits: Sequence[Hit],
        opts: QueryOptions,
        timer: Timer,
        topics: dict[str, bool] | None = None,
    ) -> Answer:
        """The stages after the search: relevance, bridge, KO-DB facts, rank (``topics``:
        ``names_topic`` of the questions already judged)."""
        with timer.stage("kodb_ms"):
            rows = self.kodb.notes_at(h.path for h in hits)
        hits = [h for h in hits if _holds_text(rows.get(h.path))]
        with timer.stage("label_ms"):
            # The best cosine (hybrid hits are in fused order; the label stays a cosine one).
            cosines = [h.cosine for h in hits if h.cosine is not None]
            relevance = assess(max(cosines) if cosines else None, self.basis())
        shown = list(hits)
        notice = None
        if opts.session_notes_only:
            shown = [h for h in shown if h.source_type == "session"]
            if not shown:
                notice = self._no_session_notes(len(hits))
        with timer.stage("kodb_ms"):
            topic = self.names_topic(text, opts, topics)
        shown, window, recency, dated = self._in_window(
            text, shown, opts, timer, relevance.sigma, topic
        )
        shown = shown[: opts.hits]
        with timer.stage("kodb_ms"):
            registry = (
                dated
                if dated is not None
                else {h.path: rows[h.path] for h in shown if h.path in rows}
            )
            succession = self.kodb.succession()
        shown = [_with_note(h, registry.get(h.path)) for h in shown]
        shown = self._excerpted(text, _marked_hits(shown, succession), registry, opts, timer)
        answer = Answer(
            text,
            "semantic",
            None,
            relevance,
            tuple(shown),
            (),
            notice=notice,
            time_window=window,
            recency=recency,
        )
        if relevance.label == "no_match" or not opts.subjects or opts.top_k == 0 or not shown:
            return self._pointed(answer, opts, timer)
        today = self.today_of(opts).isoformat()
        about, floor = _about(shown, window, recency, relevance.floor_cosine, today, topic)
        with timer.stage("bridge_ms"):
            candidates = bridge.semantic_candidates(
                about,
                floor,
                self.kodb,
                registry=registry,
                # Subjects follow the hits' order when it is not the cosines' (hybrid's
                # fused order, or the newest first).
                fused=opts.retrieval == "hybrid" or recency is not None,
                sigma=relevance.sigma,
            )
        evidence = {h.path: h.cosine or 0.0 for h in shown}
        topic = self.topic_of(text, opts)
        words = (lambda: bridge.term_candidates(topic, self.kodb)) if opts.per_token else None
        subjects, candidates = self._subjects(
            candidates,
            opts,
            timer,
            relevance,
            evidence,
            words=words,
            succession=succession,
            question=self._question(text, opts, shown, registry),
        )
        if opts.crystal_only and not subjects and candidates:
            notice = "no crystal-ready subject among the relevant ones"
        return self._pointed(replace(answer, subjects=subjects, notice=notice), opts, timer)

    def _pointed(self, answer: Answer, opts: QueryOptions, timer: Timer) -> Answer:
        """A no_match or weak answer with its ``word_matches`` and their count: a no_match
        counts the notes holding every word of the question and names the best three; a
        weak answer names the one to three it does not show ("Maël Nison" in the TSC's
        minutes: weak, the meetings naming him outside the notes, as cosines place a name
        poorly)."""
        label = answer.relevance.label
        if label not in ("no_match", "weak"):
            return answer
        if label == "no_match":
            # Every note holding the words counts: the answer shows none of them.
            found = self._word_matches(answer.query, opts, timer, WORD_POOL + 1)
            listed = self._pointers(found[:WORD_MATCHES], timer)
            count = len(found)
        else:
            found = self._word_matches(answer.query, opts, timer, WORD_MATCHES + 1)
            if len(found) > WORD_MATCHES:  # more, and the words pick nothing out
                found = []
            # The notes a person reads (text and markdown show the first few of the hits):
            # one further down is no more seen than one the search missed.
            shown = {h.path for h in answer.hits[:NOTES_SHOWN]}
            listed = tuple(h for h in self._pointers(found, timer) if h.path not in shown)
            count = len(listed)
        return replace(answer, word_matches=listed, word_match_count=count if listed else None)

    def _pointers(self, found: Sequence[tuple[str, float]], timer: Timer) -> tuple[Hit, ...]:
        """Word matches as hits (BM25, no cosine); an empty note holds no words to match."""
        if not found:
            return ()
        with timer.stage("kodb_ms"):
            rows = self.kodb.notes_at(p for p, _ in found)
        return tuple(
            Hit(p, n.title, n.source_type, None, bm25=score)
            for p, score in found
            if (n := rows.get(p)) is not None and _holds_text(n)
        )

    def _word_matches(
        self, text: str, opts: QueryOptions, timer: Timer, limit: int
    ) -> list[tuple[str, float]]:
        """The notes holding every word of a question the model placed nowhere or poorly,
        best first by BM25, at most ``limit``: a name, a code or a rare term is matched by
        words where the model's cosine cannot place it. Not when the answer is for an
        agent's hook, which spares its time for the answer, nor for episodic recall, which
        is of session notes alone."""
        if not opts.word_matches or opts.session_notes_only:
            return []
        # The words a note should hold: not the period's ("in March 2024") nor words such
        # as decide or discuss, which ask about the notes rather than name their topic.
        window, latest = self.window_of(text, opts), self.latest_of(text, opts)
        topical = set(_topical(text, window, latest))
        terms = [t for t in self.terms_of(text, opts) if t in topical]
        if not terms:
            return []
        codes = bridge.code_patterns(text, terms)
        with timer.stage("kodb_ms"):
            found = self.kodb.search_notes(
                terms, max(CODE_POOL, limit) if codes else limit, every=True
            )
            if codes:
                found = [(p, s) for p, s in found if self._holds_codes(p, codes)][:limit]
        return found

    def _holds_codes(self, path: str, codes: Sequence[re.Pattern[str]]) -> bool:
        """Whether the note's file holds each code as written in it ("X-15", not an "x" here
        and a "15" there); a file that cannot be read holds none."""
        from pipeline.vault.scan import read_note_bytes

        try:
            raw, _ = read_note_bytes(self.settings.vault, path, self.settings.vault_max_note_bytes)
        except (InputError, OSError):
            return False
        text = normalize_text(raw.decode("utf-8", "replace"))
        return all(code.search(text) for code in codes)

    def window_of(self, text: str, opts: QueryOptions) -> TimeWindow | None:
        """The period ``text`` asks about, read against ``opts.today`` (else today)."""
        return parse_window(text, self.today_of(opts))

    @staticmethod
    def today_of(opts: QueryOptions) -> date:
        """``opts.today`` (any ISO form the setting takes), else today."""
        return date.fromisoformat(opts.today) if opts.today else date.today()

    def latest_of(self, text: str, opts: QueryOptions) -> str | None:
        """The phrase of ``text`` asking for the latest, when answers put the newest first."""
        return asks_latest(text) if opts.newest_first else None

    def topic_of(self, text: str, opts: QueryOptions) -> str:
        """What notes and subjects are searched and excerpted by: the question without the
        words asking for the latest when answers put the newest first ("latest" names no
        topic), unless nothing else is left."""
        if self.latest_of(text, opts) is not None:
            rest = without_latest(text)
            if bridge.content_words(rest):
                return rest
        return text

    def terms_of(self, text: str, opts: QueryOptions) -> list[str]:
        """The words of ``topic_of``."""
        return bridge.query_terms(self.topic_of(text, opts))

    def _in_window(
        self,
        text: str,
        hits: list[Hit],
        opts: QueryOptions,
        timer: Timer,
        sigma: float | None,
        topic: bool,
    ) -> tuple[list[Hit], TimeWindow | None, Recency | None, Mapping[str, Note] | None]:
        """The hits of the question's period (``timewindow.apply_window``: undated notes
        kept and counted; no note dated in it: all kept, and the window says it was not
        applied); a question asking for the latest gets the newest first
        (``timewindow.newest_first``; all of them when it names no ``topic``); without
        either, episodic recall prefers recent sessions among equally relevant ones. Also
        the registry rows it read for their dates (None: none read)."""
        window = self.window_of(text, opts)
        latest = self.latest_of(text, opts)
        if window is None and latest is None and not opts.session_notes_only:
            return hits, None, None, None
        with timer.stage("kodb_ms"):
            dated = self.kodb.notes_at(h.path for h in hits)
        hits = [_with_note(h, dated.get(h.path)) for h in hits]
        recency = None
        if latest is not None:
            hits, recency = self._newest(latest, hits, topic, sigma, opts)
        if window is None:
            if opts.session_notes_only and recency is None:
                hits = recent_first(hits, sigma)
            return hits, None, recency, dated
        kept, window = apply_window(hits, window, opts.hits)
        return kept, window, recency, dated

    def _newest(
        self,
        latest: str,
        hits: list[Hit],
        topic: bool,
        sigma: float | None,
        opts: QueryOptions,
    ) -> tuple[list[Hit], Recency | None]:
        """The hits of a question asking for the latest, newest first
        (``timewindow.newest_first``; episodic recall's own rule for session notes), and
        what was done; unchanged when no note found is dated up to today, or the question
        has a topic and no σ says which notes are as relevant."""
        today = self.today_of(opts).isoformat()
        if not any(_dated_by(h, today) for h in hits):
            return hits, None
        if topic and not sigma:
            return hits, None
        if topic and opts.session_notes_only:
            hits = recent_first(hits, sigma)
        else:
            hits = newest_first(hits, sigma, today, topic=topic)
        return hits, Recency(latest, RECENT_TIER_SIGMAS if topic else None)

    def fallback_answer(
        self,
        text: str,
        opts: QueryOptions,
        timer: Timer,
        reason: str,
        topics: dict[str, bool] | None = None,
        *,
        leave_out: str | None = None,
    ) -> Answer:
        """Degraded mode: word search on KO-DB, ranked the same way; never loads the model.
        ``leave_out``: the note the question is the text of (``ask_many``'s ``sources``).

        Public so that batch callers (load-context, eval) answer exactly like ``ask``."""
        subjects: tuple[SubjectRank, ...] = ()
        notice = None
        if not bridge.content_words(text):
            return self._no_content(text, reason)
        with timer.stage("fulltext_ms"):
            hits, registry, window, recency, days = self._word_hits(text, opts, topics)
        hits = [h for h in hits if _holds_text(registry.get(h.path)) and h.path != leave_out]
        with timer.stage("kodb_ms"):
            succession = self.kodb.succession()
        hits = self._excerpted(text, _marked_hits(hits, succession), registry, opts, timer)
        if opts.session_notes_only and not hits:
            notice = self._no_session_notes(opts.hits)
        if opts.subjects and opts.top_k:
            with timer.stage("bridge_ms"):
                # A question about its period or the latest alone: the subjects of the notes
                # dated in it, in the notes' order, as a semantic answer has them.
                today = self.today_of(opts).isoformat()
                about, _ = _about(hits, window, recency, None, today, days is None)
                candidates = bridge.semantic_candidates(
                    about, None, self.kodb, registry=registry, fused=days is not None
                )
            evidence = {h.path: h.bm25 or 0.0 for h in hits}
            best = max((h.bm25 for h in hits if h.bm25 is not None), default=None)
            subjects, candidates = self._subjects(
                candidates,
                opts,
                timer,
                None,
                evidence,
                top_bm25=best,
                words=lambda: bridge.term_candidates(self.topic_of(text, opts), self.kodb),
                succession=succession,
                question=self._question(text, opts, hits, registry),
            )
            if opts.crystal_only and not subjects and candidates:
                notice = "no crystal-ready subject among the relevant ones"
        if opts.semantic:  # a word search asked for is no degraded answer to watch for
            record_fallback(self.settings.state_dir, reason)
        relevance = Relevance.unmeasured(
            "unscored",
            "degraded mode: notes and subjects found by words (KO-DB full text), not by meaning",
        )
        return Answer(
            text,
            "fallback",
            reason,
            relevance,
            tuple(hits),
            subjects,
            notice=notice,
            time_window=window,
            recency=recency,
        )

    def _excerpted(
        self,
        text: str,
        hits: list[Hit],
        registry: Mapping[str, Note],
        opts: QueryOptions,
        timer: Timer,
    ) -> list[Hit]:
        """The hits with the excerpt of each note that meets the question (excerpts.py), by
        the question's words that pick notes out: a word nearly every note holds ("TSC" in
        the TSC's minutes) had made a roll call's "Present — … (TSC)" the excerpt of a
        meeting over its summary. All of them when every one is such a word."""
        if not opts.excerpts or not hits:
            return hits
        from pipeline import excerpts

        s = self.settings
        terms = [t for t in self.terms_of(text, opts) if bridge.stands_alone(t)]
        with timer.stage("kodb_ms"):
            terms = self._picking_out(terms) or terms
        with timer.stage("excerpts_ms"):
            languages = {p: n.text_language for p, n in registry.items()}
            return excerpts.with_excerpts(
                hits,
                terms,
                s.vault,
                s.vault_max_note_bytes,
                languages,
                s.vault_language,
                lambda rel: not self.private.is_private(rel),
            )

    def _question(
        self, text: str, opts: QueryOptions, hits: Sequence[Hit], registry: Mapping[str, Note]
    ) -> list[tuple[str, ...]]:
        """The question's words as the facts shown are read for them (``rank.speaks``):
        each word's stems under the vault's language and the hit notes' own, and the whole
        word, as excerpts match a note's words; and ``rank.WHO`` when it asks who
        (``bridge.asks_who``)."""
        from pipeline.kodb import text as kodb_text  # the package loads SQLAlchemy: not on --help

        languages: list[str | None] = [self.settings.vault_language]
        for hit in hits:
            note = registry.get(hit.path)
            if note is not None and note.text_language:
                languages.append(note.text_language)
        groups = kodb_text.query_groups(self.terms_of(text, opts), (*languages, None))
        return [*groups, WHO] if bridge.asks_who(text) else groups

    def _word_hits(
        self, text: str, opts: QueryOptions, topics: dict[str, bool] | None = None
    ) -> tuple[
        list[Hit],
        Mapping[str, Note],
        TimeWindow | None,
        Recency | None,
        tuple[str | None, str] | None,
    ]:
        """Degraded mode's note hits: KO-DB's full-text search on the question's words,
        best first, with ``bm25`` (larger is better) and no cosine, in the question's
        period when it names one; a question about its period or the latest alone also
        gets the newest notes dated in what it asks for after them (``days_asked``), and
        one about the latest alone has them all newest first. With the registry rows of the
        notes found (the bridge reads them), the period, what was done for the latest and
        the days asked for (None: the question names a topic)."""
        window = self.window_of(text, opts)
        scan = opts.session_notes_only or window is not None
        k = max(opts.hits, EPISODIC_SCAN) if scan else opts.hits
        found = self.kodb.search_notes(self.terms_of(text, opts), k)
        registry = dict(self.kodb.notes_at(p for p, _ in found))
        hits = [
            _with_note(Hit(p, n.title, n.source_type, None, bm25=score), n)
            for p, score in found
            if (n := registry.get(p)) is not None
        ]
        recency = None
        days = self.days_asked(text, opts, topics)
        dated = [n for n in self._notes_in(days, opts) if n.path not in registry]
        registry |= {n.path: n for n in dated}
        hits += [_with_note(Hit(n.path, n.title, n.source_type, None), n) for n in dated]
        if opts.session_notes_only:
            hits = [h for h in hits if h.source_type == "session"]
        today = self.today_of(opts).isoformat()
        latest = self.latest_of(text, opts)
        if days is not None and latest is not None and any(_dated_by(h, today) for h in hits):
            hits = newest_first(hits, None, today, topic=False)
            recency = Recency(latest, None)
        if window is not None:
            hits, window = apply_window(hits, window, opts.hits)
        return hits[: opts.hits], registry, window, recency, days

    def _no_content(self, text: str, reason: str | None) -> Answer:
        """The answer to a question without content words: no_match, nothing searched."""
        relevance = Relevance.unmeasured(
            "no_match", "the question has no content words (only stop words, symbols or emoji)"
        )
        mode = "semantic" if reason is None else "fallback"
        return Answer(text, mode, reason, relevance, (), ())

    def _no_session_notes(self, scanned: int) -> str:
        if not self.kodb.count_notes("session"):
            return "no session notes in this vault"
        return f"no session note among the {scanned} notes closest to the question"

    def _subjects(
        self,
        candidates: dict[str, Candidate],
        opts: QueryOptions,
        timer: Timer,
        relevance: Relevance | None,
        evidence: dict[str, float],
        *,
        top_bm25: float | None = None,
        words: Callable[[], dict[str, Candidate]] | None = None,
        succession: Succession | None = None,
        question: Sequence[tuple[str, ...]] = (),
    ) -> tuple[tuple[SubjectRank, ...], dict[str, Candidate]]:
        """The ranked subjects of an answer, and every candidate considered.

        The order depends on counts alone, so the candidates are ranked on their counts
        first and only the ``top_k`` kept read the facts they show (the same ranking as with
        every fact read: the facts do not move a subject). Subjects named by the question's
        words (``words``: degraded mode, wiki-gap) follow every subject a hit is about, so
        they are looked for only while fewer than ``top_k`` of those are ranked."""

        def ranked(
            found: Sequence[SubjectSummary], among: Mapping[str, Candidate] | None = None
        ) -> tuple[SubjectRank, ...]:
            chosen = candidates if among is None else among
            return self._rank(
                found,
                opts,
                chosen,
                timer,
                relevance,
                evidence,
                top_bm25=top_bm25,
                question=question,
            )

        with timer.stage("kodb_ms"):
            counted = self._summaries(candidates, opts, evidence, sample=False)
        subjects = ranked(counted)
        if words is not None and len(subjects) < opts.top_k:
            with timer.stage("bridge_ms"):
                extra = {s: c for s, c in words().items() if s not in candidates}
            if extra:
                candidates = {**candidates, **extra}
                with timer.stage("kodb_ms"):
                    counted += self._summaries(extra, opts, evidence, sample=False)
                subjects = ranked(counted)
        if subjects and opts.facts_per_subject > 0:
            kept = {normalize_text(s.subject) for s in subjects}
            with timer.stage("kodb_ms"):
                shown = self._summaries(
                    {k: c for k, c in candidates.items() if k in kept}, opts, evidence
                )
            subjects = ranked(shown)
        if succession:
            subjects = self._with_successors(
                subjects, candidates, opts, timer, evidence, ranked, succession
            )
        return subjects, candidates

    def _with_successors(
        self,
        subjects: tuple[SubjectRank, ...],
        candidates: Mapping[str, Candidate],
        opts: QueryOptions,
        timer: Timer,
        evidence: dict[str, float],
        ranked: Callable[..., tuple[SubjectRank, ...]],
        succession: Succession,
    ) -> tuple[SubjectRank, ...]:
        """The succession rule (``succession.order_with_successors``): a superseded
        decision's successor comes before it, joining the answer when it was not in it
        (evidence ``successor``, with its own hit's cosine, else the old one's); the
        answer's gate (crystal-ready) and ``top_k`` hold."""
        if not subjects:
            return subjects

        def join(norm: str, old: SubjectRank) -> SubjectRank | None:
            own = candidates.get(norm)
            candidate = Candidate(
                norm,
                "successor",
                cosine=own.cosine if own is not None else old.best_cosine,
                path=own.path if own is not None else None,
                bm25=own.bm25 if own is not None else old.best_bm25,
            )
            with timer.stage("kodb_ms"):
                found = self._summaries({norm: candidate}, opts, evidence)
            joined = ranked(found, {norm: candidate})
            return joined[0] if joined else None

        return order_with_successors(subjects, succession, join, opts.top_k)

    def _summaries(
        self,
        candidates: dict[str, Candidate],
        opts: QueryOptions,
        evidence: dict[str, float],
        *,
        sample: bool = True,
    ) -> list[SubjectSummary]:
        """The candidates' KO-DB summaries: counts over all of their facts (only the hit
        notes' facts for episodic recall) and, with ``sample``, the facts an answer may show
        of them."""
        if not candidates:
            return []
        found = self.kodb.subject_summaries(
            candidates,
            sample_size=opts.facts_per_subject if sample else 0,
            evidence_files=evidence,
            only_files=evidence if opts.session_notes_only else None,
        )
        return list(found.values())

    def _rank(
        self,
        summaries: Sequence[SubjectSummary],
        opts: QueryOptions,
        candidates: dict[str, Candidate],
        timer: Timer,
        relevance: Relevance | None,
        evidence: dict[str, float] | None,
        *,
        top_bm25: float | None = None,
        question: Sequence[tuple[str, ...]] = (),
    ) -> tuple[SubjectRank, ...]:
        basis = self.basis() if relevance is not None else None
        bands: dict[float, Any] = {}  # candidates share their hits' cosines

        def band(cosine: float) -> Any:
            if cosine not in bands:
                bands[cosine] = band_of(cosine, basis)  # type: ignore[arg-type]
            return bands[cosine]

        with timer.stage("rank_ms"):
            return tuple(
                rank_summaries(
                    summaries,
                    top_k=opts.top_k,
                    facts_per_subject=opts.facts_per_subject,
                    facts_per_predicate_cap=opts.facts_per_predicate_cap,
                    candidates=candidates,
                    band_of=band if basis is not None else None,
                    top_cosine=relevance.top_cosine if relevance is not None else None,
                    sigma=relevance.sigma if relevance is not None else None,
                    top_bm25=top_bm25,
                    order=self.order,
                    evidence_files=evidence,
                    crystal_only=opts.crystal_only,
                    question=question,
                )
            )


def _topical(text: str, window: TimeWindow | None, latest: str | None) -> list[str]:
    """The words naming what ``text`` is about: not its period's phrase (``window``), the
    words asking for the latest (``latest``: it asks for them), stop words nor
    ``PERIOD_ONLY_WORDS``."""
    rest = without_latest(text) if latest is not None else text
    return topic_words(rest, *(() if window is None else (window.text,)))


def _runs(values: Sequence[int]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each run of equal neighbours in ``values``, in order."""
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            yield start, i
            start = i
