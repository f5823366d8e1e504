"""Batch session loading (`vault-ko load-context`): one context pack per session prompt.

    input lines (batch/input.py) ─▶ chunks of 256 prompts ─▶ ``Pipeline.ask_many``:
        graph check ─▶ embed (batches of equal length) ─▶ search: exact over every vector
        (batch/exact.py) or the index ─▶ KO-DB warmed for the chunk (batch/memo.py) ─▶ each
        prompt answered on its hits, or in fallback when the graph is gone
    ─▶ packs streamed to a sink, with the journal --resume reads (batch/packs.py)

The query stages stay in ``pipeline/query.py``: this module only decides how a batch is
searched and cached, and lets ``Pipeline.ask_many`` answer, so a pack equals the answer
``Pipeline.ask`` gives for the same prompt (timings aside).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np

from pipeline import bridge
from pipeline.batch.exact import ExactSearch
from pipeline.batch.input import BadLine, SessionPrompt, read_sessions
from pipeline.batch.memo import CachedKodb
from pipeline.batch.packs import PACKS_FILE, Format, Pack, PackSink, open_sink
from pipeline.calibrate import Basis, assess
from pipeline.embed import batch_invariant
from pipeline.errors import ConfigError, GraphQueryError, VaultKoError
from pipeline.model import Answer, Hit, clean_text
from pipeline.query import Pipeline, QueryOptions

log = logging.getLogger(__name__)

#: Prompts handled together: embedded, searched and looked up in KO-DB as one batch.
DEFAULT_CHUNK: Final = 256
#: auto search: below this many prompts, index queries beat reading every vector.
AUTO_EXACT_MIN_PROMPTS: Final = 32
#: auto search: reading this many notes' vectors costs about one index query (local
#: ArcadeDB; figures in docs/benchmarks-history.md), so exact search needs
#: prompts ≥ notes / this.
AUTO_NOTES_PER_PROMPT: Final = 50
#: A batch reads KO-DB's facts into memory (``kodb/resident.py``, as the service does) when
#: it holds at most this many facts per prompt of its first chunk: reading a fact once
#: costs far less than the statements a prompt's summaries take, so the copy pays for
#: itself well within the chunk (docs/batch.md). ``service_resident_facts`` caps it.
RESIDENT_FACTS_PER_PROMPT: Final = 1000

SearchChoice = Literal["auto", "exact", "index"]


@dataclass(frozen=True)
class SessionReport:
    """What a load-context run did (the summary line and the --json document)."""

    sessions: int  # valid prompts read
    written: int
    skipped_done: int  # already written by a previous run (--resume)
    bad_lines: tuple[BadLine, ...]
    labels: dict[str, int]
    modes: dict[str, int]
    search_path: str  # exact | index | none (no semantic search ran)
    searches: dict[str, int]  # prompts searched per path
    embed_batches: int
    batch_invariant: bool
    kodb_statements: int
    resident_facts: int  # KO-DB facts the batch held in memory (0: answered through SQL)
    chunks: int
    seconds: float
    out: str
    format: str
    degraded_reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The `vault-ko load-context --json` document."""
        return {
            "sessions": self.sessions,
            "written": self.written,
            "skipped_done": self.skipped_done,
            "bad_lines": [{"line": b.line, "reason": b.reason} for b in self.bad_lines],
            "labels": dict(self.labels),
            "modes": dict(self.modes),
            "search_path": self.search_path,
            "searches": dict(self.searches),
            "embed_batches": self.embed_batches,
            "batch_invariant": self.batch_invariant,
            "kodb_statements": self.kodb_statements,
            "resident_facts": self.resident_facts,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "prompts_per_second": round(self.written / self.seconds, 1) if self.seconds else None,
            "out": self.out,
            "format": self.format,
            "degraded_reasons": list(self.degraded_reasons),
        }


ProgressFn = Callable[[int, int | None], None]
BadLineFn = Callable[[BadLine], None]


@dataclass
class _Stats:
    written: int = 0
    skipped_done: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    searches: Counter[str] = field(default_factory=Counter)
    chunks: int = 0
    embed_batches: int = 0
    reasons: dict[str, None] = field(default_factory=dict)


class SessionLoader:
    """Answers many prompts as one batch over an owner Pipeline's resources.

    The loader answers through a second Pipeline that shares the owner's settings, graph
    client, (lazily) model and privacy, and sees KO-DB through a ``CachedKodb`` (and, for a
    batch large enough against the facts, a resident copy of them over it). The owner stays
    in charge of closing them.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        options: QueryOptions | None = None,
        *,
        search: SearchChoice = "auto",
        chunk_size: int = DEFAULT_CHUNK,
    ) -> None:
        if search not in ("auto", "exact", "index"):
            raise ConfigError(f"unknown search path {search!r}; choose auto, exact or index")
        if chunk_size < 1:
            raise ConfigError("--chunk-size must be at least 1")
        self.owner = pipeline
        # A context pack of a no_match prompt stays empty (DESIGN §9), and a batch's packs
        # carry what was found, not pointers: no word search is spent on them.
        chosen = options or QueryOptions.from_settings(pipeline.settings)
        self.options = replace(chosen, word_matches=False)
        self.search = search
        self.chunk_size = chunk_size
        self.kodb = CachedKodb(pipeline.kodb)
        self.batch = self._pipeline_over(self.kodb)
        self.resident_facts = 0  # facts held in memory for this batch (0: none)
        self._resident_decided = False
        self._expected = 0  # prompts the run expects (its input's lines, when known)
        self._exact: ExactSearch | None = None
        self._path: str | None = None  # the search path once chosen: exact | index
        self._stats = _Stats()

    # -- one chunk ------------------------------------------------------------------------
    def answer_chunk(
        self,
        prompts: Sequence[str],
        stats: _Stats | None = None,
        sources: Sequence[str | None] | None = None,
    ) -> list[Answer]:
        """Answers for these prompts, in order; equal to ``Pipeline.ask`` for each, timings
        aside. Each answer's timings hold its own stages plus its share of batch stages.
        ``sources``: the note each prompt is the text of, left out of its answer."""
        if stats is not None:
            self._stats = stats
        if not prompts:
            return []
        self._hold_facts(len(prompts))
        # Chosen for the whole chunk: ask_many searches it in runs of equal depth, and the
        # first run alone (one question asking for a period) would choose the index.
        self._choose_path(max(len(prompts), self._expected))
        if self.options.excerpts:  # each answer's excerpts weigh its words by their shares
            asked = (self.batch.terms_of(clean_text(p).strip(), self.options) for p in prompts)
            self.kodb.word_shares(sorted({t for terms in asked for t in terms}))
        before = self.batch.embed_batches
        answers = self.batch.ask_many(
            prompts, self.options, search=self._search, prefetch=self, sources=sources
        )
        self._stats.embed_batches += self.batch.embed_batches - before
        for answer in answers:
            if answer.degraded_reason:
                self._stats.reasons.setdefault(answer.degraded_reason, None)
        self.kodb.trim()
        return answers

    def _pipeline_over(self, kodb: Any) -> Pipeline:
        """A pipeline over this view of KO-DB, sharing the owner's graph client, model,
        privacy and order."""
        owner = self.owner
        return owner.app.sharing(kodb=kodb).pipeline(
            include_private=not owner.private, order=owner.order
        )

    def _hold_facts(self, prompts: int) -> None:
        """Once, at the first chunk: answer from a resident copy of KO-DB's facts when the
        batch (the input's lines when known, else the chunk) is large enough against them
        (``RESIDENT_FACTS_PER_PROMPT``). Answers are
        the same either way (the copy's summaries rank as the store's)."""
        if self._resident_decided:
            return
        self._resident_decided = True
        owner = self.owner
        prompts = max(prompts, self._expected)
        limit = min(owner.settings.service_resident_facts, prompts * RESIDENT_FACTS_PER_PROMPT)
        if limit <= 0:
            return
        from pipeline.kodb.resident import ResidentKodb

        store = owner.app.kodb
        if store.count_facts() > limit:
            return
        private = owner.private.is_private if owner.private else None
        data = store.resident_copy(private)
        self.batch = self._pipeline_over(ResidentKodb(self.kodb, data, private))
        self.resident_facts = data.facts

    def _search(self, vectors: np.ndarray, k: int) -> Iterator[list[Hit]]:
        """The batch search ``ask_many`` calls: exact over every vector, or the index (one
        query per prompt, lazily, so the prompts searched before a failure keep theirs)."""
        path = self._choose_path(len(vectors))
        if path == "exact":
            assert self._exact is not None
            rows = iter(self._exact.search_many(vectors, k, self.batch.index_search))
        else:
            rows = (self.batch.index_search(v, k) for v in vectors)
        for hits in rows:
            self._stats.searches[path] += 1
            yield hits

    def _choose_path(self, prompts: int) -> str:
        """exact or index, chosen once per run (auto: by batch size against vault size)."""
        if self._path is not None:
            return self._path
        choice = self.search
        if choice == "auto":
            if prompts < AUTO_EXACT_MIN_PROMPTS:
                choice = "index"
            else:
                notes = len(self.kodb.notes())
                choice = "exact" if prompts * AUTO_NOTES_PER_PROMPT >= notes else "index"
        if choice == "exact":
            try:
                exact = ExactSearch.load(self.batch.graph, self.kodb)
            except GraphQueryError as exc:  # e.g. embeddings of several sizes
                log.warning("exact search unavailable, using the index: %s", exc)
                exact = None
            dims = getattr(self.batch.embedder, "dims", None)
            if exact is not None and exact.paths and dims is not None and exact.dims != dims:
                log.warning("graph vectors have %d dims, the model %s: index", exact.dims, dims)
                exact = None
            if exact is None:
                choice = "index"
            self._exact = exact
        self._path = choice
        return choice

    # -- KO-DB prefetch (``query.BatchPrefetch``): a few set-based statements per chunk ---
    def semantic(self, found: Sequence[Sequence[Hit]], basis: Basis) -> None:
        """Warm the cache for the chunk's semantic answers: the registry rows of the hits,
        the subjects of the best hits' files, the subjects named by hit titles, then the
        counts of every candidate (what answers rank on); one statement each.

        Only a warm-up: answers do not depend on it (a miss is fetched when asked).
        """
        opts = self.options
        if not (opts.subjects and opts.top_k) or opts.session_notes_only or self.resident_facts:
            return
        shown = [list(hits)[: opts.hits] for hits in found]
        live: list[tuple[list[Hit], float | None]] = []
        for hits in shown:
            # Labelled as the answer is: by its best cosine (hybrid hits are in fused order).
            cosines = [h.cosine for h in hits if h.cosine is not None]
            rel = assess(max(cosines) if cosines else None, basis)
            if rel.label != "no_match" and hits:
                live.append((hits, rel.floor_cosine))
        self.kodb.notes_at({h.path for hits in shown for h in hits})
        above = [bridge.live_hits(hits, floor) for hits, floor in live]
        if not any(above):
            return
        self.kodb.subjects_by_source_file(
            {h.path for hits in above for h in hits[: bridge.MENTION_POOL]}
        )
        titles = {h.title for hits in above for h in hits if h.title.strip()}
        if titles:
            self.kodb.search_subjects_many(sorted(titles))
        candidates: set[str] = set()
        for hits, floor in live:
            candidates.update(bridge.semantic_candidates(hits, floor, self.kodb))
        if candidates:
            self.kodb.subject_summaries(candidates, sample_size=0)

    def words(self, questions: Sequence[str]) -> None:
        """Warm the cache for the chunk's degraded answers: every question word in one
        search (answers rank the word-named subjects only when their hits leave room, so
        their counts are fetched when asked)."""
        if not (self.options.subjects and self.options.top_k) or self.resident_facts:
            return
        terms = sorted({t for text in questions for t in self.batch.terms_of(text, self.options)})
        if not terms:
            return
        self.kodb.search_subjects_many(terms)

    # -- the whole run ----------------------------------------------------------------------
    def run(
        self,
        items: Iterable[SessionPrompt | BadLine],
        sink: PackSink,
        *,
        total_lines: int | None = None,
        progress: ProgressFn | None = None,
        on_bad_line: BadLineFn | None = None,
        out_label: str = "",
        fmt: str = "jsonl",
    ) -> SessionReport:
        """Answer every prompt, writing each pack as it is ready; skips ids the sink already
        holds (--resume). Bad lines are passed to ``on_bad_line`` and listed in the report."""
        started = time.perf_counter()
        stats = self._stats = _Stats()
        self._expected = total_lines or 0
        done = sink.done_ids()
        bad: list[BadLine] = []
        sessions = 0
        lines = 0
        chunk: list[SessionPrompt] = []

        def flush() -> None:
            if not chunk:
                return
            answers = self.answer_chunk([s.prompt for s in chunk], sources=[s.note for s in chunk])
            for item, answer in zip(chunk, answers, strict=True):
                sink.write(Pack(item.id, item.prompt, answer))
                stats.written += 1
                stats.labels[answer.relevance.label] += 1
                stats.modes[answer.mode] += 1
            sink.commit()
            stats.chunks += 1
            chunk.clear()
            if progress is not None:
                progress(lines, total_lines)

        for item in items:
            lines = item.line
            if isinstance(item, BadLine):
                bad.append(item)
                if on_bad_line is not None:
                    on_bad_line(item)
                continue
            sessions += 1
            if item.id in done:
                stats.skipped_done += 1
                continue
            chunk.append(item)
            if len(chunk) >= self.chunk_size:
                flush()
        flush()
        sink.close()
        if progress is not None:
            progress(lines, total_lines)
        return SessionReport(
            sessions=sessions,
            written=stats.written,
            skipped_done=stats.skipped_done,
            bad_lines=tuple(bad),
            labels=dict(sorted(stats.labels.items())),
            modes=dict(sorted(stats.modes.items())),
            search_path=self._path if stats.searches else "none",
            searches=dict(sorted(stats.searches.items())),
            embed_batches=stats.embed_batches,
            batch_invariant=batch_invariant(),
            kodb_statements=self.kodb.statements,
            resident_facts=self.resident_facts,
            chunks=stats.chunks,
            seconds=time.perf_counter() - started,
            out=out_label,
            format=fmt,
            degraded_reasons=tuple(stats.reasons),
        )


def load_context(
    pipeline: Pipeline,
    lines: Iterable[str | bytes],
    out_dir: Path,
    *,
    fmt: Format = "jsonl",
    options: QueryOptions | None = None,
    resume: bool = False,
    search: SearchChoice = "auto",
    chunk_size: int = DEFAULT_CHUNK,
    total_lines: int | None = None,
    progress: ProgressFn | None = None,
    on_bad_line: BadLineFn | None = None,
) -> SessionReport:
    """Read session lines, answer them as a batch over ``pipeline``, write packs to
    ``out_dir`` (``packs.jsonl`` or one markdown file per session); the in-process API of
    `vault-ko load-context`."""
    loader = SessionLoader(pipeline, options, search=search, chunk_size=chunk_size)
    sink = open_sink(out_dir, fmt, loader.options, resume=resume)
    try:
        items = read_sessions(lines, pipeline.settings, pipeline.private)
        label = str(out_dir / PACKS_FILE) if fmt == "jsonl" else str(out_dir)
        return loader.run(
            items,
            sink,
            total_lines=total_lines,
            progress=progress,
            on_bad_line=on_bad_line,
            out_label=label,
            fmt=fmt,
        )
    except VaultKoError:
        sink.close()  # keep what was committed, for --resume
        raise


def session_packs(
    pipeline: Pipeline,
    sessions: Sequence[tuple[str, str]],
    options: QueryOptions | None = None,
) -> list[Pack]:
    """Packs for ``(id, prompt)`` pairs answered as one batch, in order, each equal to the
    pack load-context writes for it (the service's and the MCP server's session context)."""
    loader = SessionLoader(pipeline, options)
    packs: list[Pack] = []
    for start in range(0, len(sessions), loader.chunk_size):
        chunk = sessions[start : start + loader.chunk_size]
        answers = loader.answer_chunk([prompt for _, prompt in chunk])
        packs.extend(Pack(sid, prompt, a) for (sid, prompt), a in zip(chunk, answers, strict=True))
    return packs
