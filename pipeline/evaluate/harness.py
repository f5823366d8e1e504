"""Run a collection through the whole pipeline in a throwaway vault and measure it.

    docs ─▶ temp vault (one wiki note per doc) ─▶ own local graph on free ports ─▶ sync
         (ingest + embed + calibrate) ─▶ every query, semantic and degraded ─▶ EvalReport

Nothing of the user's is touched: the vault, the SQLite KO-DB and the graph server all live
in a temporary folder, and the server is stopped and the folder removed at the end, also
when something fails. Each document becomes ``wiki/<safe-id>.md`` whose title is the doc
title and whose frontmatter ``subject`` is that title too, with the property ``doc_id``: so
the ingest extractor records the fact (title, doc_id, id, note) and degraded mode, which
searches subjects by query words, can reach a document through the words of its title (and
only through them).
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import noisefloor as nf
from pipeline.calibrate import Basis
from pipeline.config import Settings, load_settings
from pipeline.evaluate.beir import Collection, Doc, Query
from pipeline.evaluate.metrics import mean_scores, rate, roc_auc
from pipeline.model import Answer, Calibration, normalize_text

if TYPE_CHECKING:
    from pipeline.query import Pipeline

#: Notes asked of the graph per query: recall@100 needs a hundred.
HITS = 100
#: Subjects asked of degraded mode per query, so it too can reach a hundred notes.
FALLBACK_SUBJECTS = 100
NOTES_FOLDER = "wiki"
SAFE_ID_MAX = 80

#: Fixed cosine thresholds other memory tools use to drop results, applied to the same top
#: cosines (a query is silenced when its best note is below the threshold).
FIXED_THRESHOLDS: tuple[tuple[str, float], ...] = (
    ("mem0 (cosine >= 0.1)", 0.1),
    ("LightRAG (cosine >= 0.2); Graphiti 0.6 on Neo4j's (1+cos)/2 scale is the same", 0.2),
    ("Basic Memory (cosine >= 0.55)", 0.55),
)

#: The labels a semantic answer can carry, in report order.
LABELS = (nf.STRONG, nf.MODERATE, nf.WEAK, nf.NO_MATCH, nf.UNSCORED)

Progress = Callable[[str], None]

_UNSAFE = re.compile(r"[^a-z0-9._-]+")


def safe_id(doc_id: str) -> str:
    """A file-name stem for a document id: lower-case ASCII letters, digits, ``._-``.

    Lower case because macOS and Windows file systems ignore case; ``note_paths`` makes the
    stems unique when two ids map to the same one.
    """
    stem = _UNSAFE.sub("-", doc_id.casefold())[:SAFE_ID_MAX].strip("-.")
    return stem or "doc"


def note_paths(docs: Mapping[str, Doc]) -> dict[str, str]:
    """doc id → vault-relative note path, unique even when safe ids collide."""
    used: set[str] = set()
    paths: dict[str, str] = {}
    for doc_id in docs:
        stem = safe_id(doc_id)
        candidate, n = stem, 1
        while candidate in used:
            n += 1
            candidate = f"{stem}-{n}"
        used.add(candidate)
        paths[doc_id] = f"{NOTES_FOLDER}/{candidate}.md"
    return paths


def note_title(doc: Doc) -> str:
    """The note's title: the doc title, else its id (a note needs a name to be a subject)."""
    return " ".join(doc.title.split()) or doc.id


def note_text(doc: Doc) -> str:
    """The markdown of one document's note (frontmatter strings as JSON, valid YAML)."""

    def q(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    title = note_title(doc)
    return (
        f"---\ntitle: {q(title)}\nsubject: {q(title)}\ndoc_id: {q(doc.id)}\n---\n\n"
        f"{doc.text.strip()}\n"
    )


def build_vault(collection: Collection, vault: Path) -> dict[str, str]:
    """Write one wiki note per document under ``vault``; returns note path → doc id."""
    paths = note_paths(collection.docs)
    for doc_id, rel in paths.items():
        target = vault / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(note_text(collection.docs[doc_id]), encoding="utf-8")
    return {rel: doc_id for doc_id, rel in paths.items()}


# -- results --------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryOutcome:
    """One query's label and, for judged on-topic queries, its two rankings."""

    query_id: str
    group: str  # "on_topic" or the name of the off-topic collection
    label: str
    top_cosine: float | None
    z: float | None
    semantic: tuple[str, ...] = ()  # doc ids, best first
    fallback: tuple[str, ...] = ()


@dataclass(frozen=True)
class CalibrationUsed:
    """The numbers that labelled the answers, and the measurement behind them."""

    source: str  # vault | embedder-default | none
    noise_floor: float | None
    sigma: float | None  # as used: clamped to the profile's bounds
    mu: float
    tight: bool
    floor_cosine: float | None
    default_n: float | None
    margin: float
    measured: Calibration | None

    def to_dict(self) -> dict[str, Any]:
        m = self.measured
        return {
            "source": self.source,
            "noise_floor": self.noise_floor,
            "sigma": self.sigma,
            "mu": self.mu,
            "tight": self.tight,
            "floor_cosine": self.floor_cosine,
            "default_noise_floor": self.default_n,
            "floor_sigma_margin": self.margin,
            "measured": None
            if m is None
            else {
                "noise_floor": m.noise_floor,
                "sigma": m.sigma,
                "mu": m.mu,
                "n_notes": m.n_notes,
                "n_pairs": m.n_pairs,
                "probe_set_version": m.probe_set_version,
            },
        }


@dataclass(frozen=True)
class EvalReport:
    """Everything `vault-ko eval` measured; ``to_dict`` is its JSON contract."""

    collection: str
    offtopic: tuple[str, ...]
    model: str
    dims: int
    docs: int
    notes: int
    calibration: CalibrationUsed
    outcomes: tuple[QueryOutcome, ...]
    qrels: Mapping[str, Mapping[str, int]]
    seconds: Mapping[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    # -- derived figures ------------------------------------------------------------------
    def on_topic(self) -> list[QueryOutcome]:
        """Outcomes of the judged queries of the collection."""
        return [o for o in self.outcomes if o.group == "on_topic"]

    def off_topic(self, name: str | None = None) -> list[QueryOutcome]:
        """Outcomes of the off-topic queries (of one off-topic collection when named)."""
        return [
            o for o in self.outcomes if o.group != "on_topic" and (name is None or o.group == name)
        ]

    def retrieval(self, mode: str) -> dict[str, float]:
        """nDCG@10, recall@10, recall@100, MRR@10 of ``mode`` (semantic or fallback)."""
        runs = {o.query_id: getattr(o, mode) for o in self.on_topic()}
        return mean_scores(runs, {q: self.qrels[q] for q in runs})

    @staticmethod
    def label_counts(outcomes: Sequence[QueryOutcome]) -> dict[str, int]:
        """Outcomes per relevance label, every label listed."""
        counts = Counter(o.label for o in outcomes)
        return {label: counts.get(label, 0) for label in LABELS}

    def fixed_thresholds(self) -> list[dict[str, Any]]:
        """Silence rates if a fixed cosine threshold (``FIXED_THRESHOLDS``) cut the answers."""
        on = [o.top_cosine for o in self.on_topic()]
        off = [o.top_cosine for o in self.off_topic()]
        rows = []
        for policy, threshold in FIXED_THRESHOLDS:
            rows.append(
                {
                    "policy": policy,
                    "threshold": threshold,
                    "false_silence": rate(sum(_silenced(c, threshold) for c in on), len(on)),
                    "offtopic_silence": rate(sum(_silenced(c, threshold) for c in off), len(off)),
                }
            )
        return rows

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """The JSON document of `vault-ko eval --json`."""
        on, off = self.on_topic(), self.off_topic()
        data: dict[str, Any] = {
            "collection": self.collection,
            "offtopic_collections": list(self.offtopic),
            "model": self.model,
            "dims": self.dims,
            "docs": self.docs,
            "notes": self.notes,
            "queries": {
                "on_topic": len(on),
                "off_topic": len(off),
                "off_topic_by_collection": {n: len(self.off_topic(n)) for n in self.offtopic},
            },
            "calibration": self.calibration.to_dict(),
            "semantic": self.retrieval("semantic"),
            "fallback": self.retrieval("fallback"),
            "labels": {
                "on_topic": self.label_counts(on),
                "off_topic": self.label_counts(off),
                "off_topic_by_collection": {
                    n: self.label_counts(self.off_topic(n)) for n in self.offtopic
                },
            },
            "false_silence": rate(sum(o.label == nf.NO_MATCH for o in on), len(on)),
            "offtopic_silence": rate(sum(o.label == nf.NO_MATCH for o in off), len(off)),
            "offtopic_confident": rate(
                sum(o.label in (nf.MODERATE, nf.STRONG) for o in off), len(off)
            ),
            "auc_z": roc_auc(_finite(o.z for o in on), _finite(o.z for o in off)),
            "auc_cosine": roc_auc(
                _finite(o.top_cosine for o in on), _finite(o.top_cosine for o in off)
            ),
            "fixed_thresholds": self.fixed_thresholds(),
            "fallback_reach": "finds a document only through the words of its title (each "
            "document's note has the title as its subject)",
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "warnings": list(self.warnings),
        }
        if per_query:
            data["per_query"] = [
                {
                    "id": o.query_id,
                    "group": o.group,
                    "label": o.label,
                    "top_cosine": o.top_cosine,
                    "z": o.z,
                    "semantic_top10": list(o.semantic[:10]),
                    "fallback_top10": list(o.fallback[:10]),
                }
                for o in self.outcomes
            ]
        return data


def _silenced(cosine: float | None, threshold: float) -> bool:
    # No hit at all is silence under every policy.
    return cosine is None or cosine < threshold


def _finite(values: Any) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


# -- the run ----------------------------------------------------------------------------


def eval_settings(vault: Path, state_dir: Path, overrides: Mapping[str, Any]) -> Settings:
    """Settings for the throwaway vault: the user's model choices, never their stores.

    The environment may name the model, device and batch size; the KO-DB and graph are
    always the temporary ones (a user's VAULT_KO_KODB_URL must not receive test notes).
    """
    settings = load_settings(vault, overrides=dict(overrides))
    return settings.replace(
        state_dir=state_dir,
        kodb_url=None,
        graph_url=None,
        graph_http_url=None,
        graph_password=None,
        graph_password_file=None,
        graph_database=None,
        graph_dialect=None,
    )


def run_eval(
    collection: Collection,
    offtopic: Sequence[tuple[str, Sequence[Query]]] = (),
    *,
    overrides: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    workdir: str | Path | None = None,
) -> EvalReport:
    """Build a temporary vault from ``collection``, run every query, measure, clean up.

    ``offtopic`` holds (name, queries) of other collections: those queries are only
    labelled. ``overrides`` are settings such as ``embed_model``. ``workdir`` is the parent
    of the temporary folder (default: the system's temp dir).
    """
    from pipeline.embed import get_embedder
    from pipeline.graph.local import LocalGraph

    say = progress or (lambda _msg: None)
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="vault-ko-eval-", dir=workdir) as tmp:
        vault, state_dir = Path(tmp) / "vault", Path(tmp) / "state"
        t0 = time.perf_counter()
        path_to_doc = build_vault(collection, vault)
        seconds["build_vault"] = time.perf_counter() - t0
        say(f"wrote {len(path_to_doc)} notes for {collection.name}")

        base = eval_settings(vault, state_dir, overrides or {})
        t0 = time.perf_counter()
        embedder = get_embedder(base)
        seconds["load_model"] = time.perf_counter() - t0
        say(f"model {embedder.model_id} ({embedder.dims}d)")

        local = LocalGraph(state_dir)
        try:
            t0 = time.perf_counter()
            local.up(dims=int(embedder.dims), settings=base)
            seconds["graph_up"] = time.perf_counter() - t0
            say(f"local graph up at {local.settings_for(base).graph_url}")
            return _measure(
                collection,
                offtopic,
                local.settings_for(base),
                embedder,
                path_to_doc,
                seconds,
                say,
            )
        finally:
            local.down()
            say("local graph stopped")


def _measure(
    collection: Collection,
    offtopic: Sequence[tuple[str, Sequence[Query]]],
    settings: Settings,
    embedder: Any,
    path_to_doc: Mapping[str, str],
    seconds: dict[str, float],
    say: Progress,
) -> EvalReport:
    from pipeline.query import Pipeline, QueryOptions, Timer
    from pipeline.sync import sync_vault

    warnings = list(collection.warnings)
    with Pipeline(settings, embedder=embedder) as p:
        t0 = time.perf_counter()
        report = sync_vault(settings, p.kodb, p.graph, embedder, force_calibration=True)
        seconds["sync"] = time.perf_counter() - t0
        for skipped in report.ingest.skipped:
            warnings.append(f"note {skipped.path} was not ingested: {skipped.reason}")
        for path, reason in report.embed.skipped:
            warnings.append(f"note {path} was not embedded: {reason}")
        notes = len(p.kodb.notes())
        say(f"synced {notes} notes ({report.embed.embedded} embedded); calibrated")
        calibration = _calibration_used(p.basis(), report.calibration)

        judged = collection.judged_queries()
        batches: list[tuple[str, Query]] = [("on_topic", q) for q in judged]
        for name, queries in offtopic:
            batches.extend((name, q) for q in queries)
        t0 = time.perf_counter()
        vectors = embedder.embed([q.text for _, q in batches])
        seconds["embed_queries"] = time.perf_counter() - t0
        say(f"embedded {len(batches)} queries ({len(judged)} on-topic)")

        semantic_opts = QueryOptions.from_settings(settings, hits=HITS, subjects=False)
        fallback_opts = QueryOptions.from_settings(
            settings, top_k=FALLBACK_SUBJECTS, facts_per_subject=1
        )
        search = p.index_search
        outcomes = []
        t0 = time.perf_counter()
        for i, ((group, query), vector) in enumerate(zip(batches, vectors, strict=True)):
            answer = p.answer_from_vector(query.text, vector, semantic_opts, Timer(), search=search)
            ranked = tuple(path_to_doc[h.path] for h in answer.hits if h.path in path_to_doc)
            fallback: tuple[str, ...] = ()
            if group == "on_topic":
                degraded = p.fallback_answer(query.text, fallback_opts, Timer(), "vault-ko eval")
                fallback = _fallback_docs(p, degraded, path_to_doc)
            outcomes.append(
                QueryOutcome(
                    query.id,
                    group,
                    answer.relevance.label,
                    answer.relevance.top_cosine,
                    answer.relevance.z,
                    ranked,
                    fallback,
                )
            )
            if (i + 1) % 100 == 0:
                say(f"queried {i + 1}/{len(batches)}")
        seconds["queries"] = time.perf_counter() - t0
        say(f"ran {len(batches)} queries")
        return EvalReport(
            collection=collection.name,
            offtopic=tuple(name for name, _ in offtopic),
            model=embedder.model_id,
            dims=int(embedder.dims),
            docs=len(collection.docs),
            notes=notes,
            calibration=calibration,
            outcomes=tuple(outcomes),
            qrels={q.id: dict(collection.qrels[q.id]) for q in judged},
            seconds=dict(seconds),
            warnings=tuple(warnings),
        )


def _fallback_docs(p: Pipeline, answer: Answer, path_to_doc: Mapping[str, str]) -> tuple[str, ...]:
    """Docs reachable from a degraded answer: its subjects' source files, by subject rank.

    Within one subject, files of its more confident facts come first, then by path.
    """
    norms = [normalize_text(s.subject) for s in answer.subjects]
    by_subject: dict[str, list[tuple[float, str]]] = {}
    for fact in p.kodb.facts_for_subjects(norms):
        by_subject.setdefault(fact.subject_norm, []).append((-fact.confidence, fact.source_file))
    seen: dict[str, None] = {}
    for norm in norms:
        for _, path in sorted(by_subject.get(norm, ())):
            doc = path_to_doc.get(path)
            if doc is not None:
                seen.setdefault(doc, None)
    return tuple(seen)


def _calibration_used(basis: Basis, measured: Calibration | None) -> CalibrationUsed:
    return CalibrationUsed(
        source=basis.source,
        noise_floor=basis.noise_floor,
        sigma=basis.sigma,
        mu=basis.mu,
        tight=nf.is_tight_vault(basis.mu),
        floor_cosine=basis.floor_cosine,
        default_n=basis.default_n,
        margin=basis.margin,
        measured=measured,
    )
