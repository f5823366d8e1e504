"""Run a collection or a judged vault through the whole pipeline, in throwaway stores.

    BEIR collection ─▶ temp vault (one wiki note per doc) ─┐
    a vault folder + judged questions ─────────────────────┴▶ own KO-DB and local graph on
        free ports ─▶ sync (ingest + embed + calibrate) ─▶ every question, semantic and
        degraded ─▶ EvalReport (note retrieval, answer quality, labels)

Nothing of the user's is touched: KO-DB and the graph server live in a temporary folder
(a judged vault is only read), and the server is stopped and the folder removed at the
end, also when something fails.

A BEIR document becomes ``wiki/<safe-id>.md`` whose title is the doc title and whose
frontmatter ``subject`` is that title (with the id added when two documents share a title,
so each document is one subject), with the property ``doc_id``. A judged vault is ingested
as it is, with its own ``vault-ko.toml`` folder globs and model.

Two rankings are measured per question, in semantic and in degraded mode: the note hits
and the subjects (the answer a person reads). In a BEIR collection both map to documents
(a subject is its document's title). In a judged vault both map to subjects: a note hit
counts as its own subject, once (a second hit on the same subject gains nothing), and its
ideal ranking holds only judged subjects that have a note of their own.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import bridge
from pipeline import noisefloor as nf
from pipeline.calibrate import Basis
from pipeline.config import Settings, load_settings
from pipeline.errors import EvalDegraded, InputError
from pipeline.evaluate.bands import Point, band_table
from pipeline.evaluate.beir import Collection, Doc, Query
from pipeline.evaluate.judged import ANSWER_GRADE, SPLITS, JudgedQuestion
from pipeline.evaluate.metrics import (
    answer_scores,
    answered_in_top,
    first_occurrences,
    mean_scores,
    rate,
    roc_auc,
)
from pipeline.model import Answer, Calibration, Hit, normalize_text
from pipeline.vault.scan import NOTE_SUFFIX

if TYPE_CHECKING:
    from pipeline.app import App
    from pipeline.query import Pipeline
    from pipeline.sync import SyncReport

#: Notes asked of the graph per query: recall@100 needs a hundred. The subject answer is
#: made from the first ``query_hits`` of them, as a user's query would be.
HITS = 100
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
#: Retrieval modes measured on every question: the graph's vectors, vectors fused with
#: KO-DB's full text, and degraded mode (full text only, what a user gets with the graph
#: down). The report's ``semantic`` is the default retrieval (setting query_retrieval).
RANKED_MODES = ("dense", "hybrid", "fallback")
#: The modes the answers table shows: the default retrieval, then degraded mode.
MODES = ("semantic", "fallback")

Progress = Callable[[str], None]
#: Makes the composition root over given settings (``pipeline.app.App``: its keyword
#: ``embedder`` shares a loaded model); the harness is handed it by its shell.
AppFactory = Callable[..., "App"]

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


def doc_subjects(docs: Mapping[str, Doc]) -> dict[str, str]:
    """doc id → the subject of its note: its title, with `` [id]`` added when documents
    share a title (case-folded), so that each document is a subject of its own."""
    counts = Counter(normalize_text(note_title(d)) for d in docs.values())
    return {
        doc_id: note_title(doc)
        if counts[normalize_text(note_title(doc))] == 1
        else f"{note_title(doc)} [{doc_id}]"
        for doc_id, doc in docs.items()
    }


def note_text(doc: Doc, subject: str | None = None) -> str:
    """The markdown of one document's note (frontmatter strings as JSON, valid YAML)."""

    def q(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    title = note_title(doc)
    return (
        f"---\ntitle: {q(title)}\nsubject: {q(subject or title)}\ndoc_id: {q(doc.id)}\n---\n\n"
        f"{doc.text.strip()}\n"
    )


def build_vault(collection: Collection, vault: Path) -> dict[str, str]:
    """Write one wiki note per document under ``vault``; returns note path → doc id."""
    paths = note_paths(collection.docs)
    subjects = doc_subjects(collection.docs)
    for doc_id, rel in paths.items():
        target = vault / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(note_text(collection.docs[doc_id], subjects[doc_id]), encoding="utf-8")
    return {rel: doc_id for doc_id, rel in paths.items()}


# -- results --------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryOutcome:
    """One query's label and, for judged on-topic queries, its rankings.

    Rankings are ids, best first: documents (BEIR) or case-folded subjects (judged vault),
    per retrieval mode (``RANKED_MODES``): ``notes`` rank the note hits, ``subjects`` the
    answer's subjects; ``baseline`` in ``notes`` is the plain BM25 library's ranking.
    """

    query_id: str
    group: str  # "on_topic" or the name of the off-topic collection
    label: str
    top_cosine: float | None
    z: float | None
    notes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # mode -> ranking
    subjects: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # mode -> ranking
    split: str | None = None
    text: str = ""


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
    """Everything `vault-ko eval` measured; ``to_dict`` is its JSON contract.

    ``qrels`` grade the note ranking and ``subject_qrels`` the subject ranking, per query
    id; in a BEIR collection they are the same document judgements.
    """

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
    kind: str = "beir"  # beir | vault
    subject_qrels: Mapping[str, Mapping[str, int]] | None = None
    answer_grade: int = 1  # the grade a subject needs to count as answering
    default_retrieval: str = "hybrid"  # what "semantic" means: dense or hybrid
    language: str = "english"  # the full-text index's stemmer (setting vault_language)
    long_notes: str = "passages"  # how long notes were embedded (setting embed_long_notes)
    vectors: int = 0  # the vectors the sync stored: a note's own, and long notes' passages
    #: retrieval mode -> how many of its answers were semantic and how many degraded
    answers_by_mode: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    # -- derived figures ------------------------------------------------------------------
    def on_topic(self, split: str | None = None) -> list[QueryOutcome]:
        """Outcomes of the judged queries of the collection (of one split when named)."""
        return [
            o
            for o in self.outcomes
            if o.group == "on_topic" and (split is None or o.split == split)
        ]

    def off_topic(self, name: str | None = None) -> list[QueryOutcome]:
        """Outcomes of the off-topic queries (of one off-topic collection when named)."""
        return [
            o for o in self.outcomes if o.group != "on_topic" and (name is None or o.group == name)
        ]

    def splits(self) -> list[str]:
        """The splits the judged questions carry, in SPLITS order."""
        present = {o.split for o in self.on_topic()}
        return [s for s in SPLITS if s in present]

    def _mode(self, mode: str) -> str:
        return self.default_retrieval if mode == "semantic" else mode

    def recommended_retrieval(self) -> str:
        """The retrieval with the better note nDCG@10 on this collection (dense or hybrid;
        a tie keeps the default): no one retrieval is best on every collection measured
        (docs/degraded-mode.md), so a vault's own eval says which to set."""
        scores = {m: self.retrieval(m)["ndcg@10"] for m in ("dense", "hybrid")}
        return max(scores, key=lambda m: (scores[m], m == self.default_retrieval))

    def retrieval(self, mode: str) -> dict[str, float]:
        """nDCG@10, recall@10, recall@100, MRR@10 of the note hits of ``mode`` (a
        ``RANKED_MODES`` name, ``semantic`` for the default, or ``baseline``)."""
        key = self._mode(mode)
        runs = {o.query_id: o.notes.get(key, ()) for o in self.on_topic()}
        return mean_scores(runs, {q: self.qrels[q] for q in runs})

    def answers(self, mode: str, split: str | None = None) -> dict[str, float]:
        """Answer quality of ``mode``: subject nDCG@10 and P@5, the share of questions whose
        top 3 subjects hold an answering one, and the note hits' nDCG@10 beside them."""
        key = self._mode(mode)
        subject_qrels = self.subject_qrels if self.subject_qrels is not None else self.qrels
        outcomes = self.on_topic(split)
        return answer_scores(
            [o.subjects.get(key, ()) for o in outcomes],
            [o.notes.get(key, ()) for o in outcomes],
            [subject_qrels[o.query_id] for o in outcomes],
            [self.qrels[o.query_id] for o in outcomes],
            answer_grade=self.answer_grade,
        )

    def band_points(self, collection: str | None = None) -> list[Point]:
        """Every answer as ``bands.Point`` (default retrieval), named ``collection``
        (default: the report's): its z and label, and for on-topic ones whether the top
        note is judged relevant (grade ≥ 1) or answering (its question's highest grade),
        and, on a judged vault, whether an answering subject is in the top three."""
        key = self._mode("semantic")
        name = collection or self.collection
        subject_qrels = self.subject_qrels if self.subject_qrels is not None else self.qrels
        out: list[Point] = []
        for o in self.outcomes:
            silenced = o.label == nf.NO_MATCH
            if o.group != "on_topic":
                out.append(Point(name, o.z, silenced, o.label, on_topic=False))
                continue
            notes, judged = o.notes.get(key, ()), self.qrels[o.query_id]
            grade = judged.get(notes[0], 0) if notes else 0
            best = max((g for g in judged.values() if g > 0), default=None)
            top3 = (
                answered_in_top(
                    o.subjects.get(key, ()), subject_qrels[o.query_id], 3, self.answer_grade
                )
                if self.kind == "vault"
                else None
            )
            relevant, answering = grade >= 1, best is not None and grade >= best
            out.append(Point(name, o.z, silenced, o.label, True, relevant, answering, top3))
        return out

    def bands(self) -> dict[str, dict[str, Any]]:
        """What each band's on-topic answers deliver, by the labels they carried
        (``bands.band_table``; ``collections`` left out: one)."""
        table = band_table(self.band_points(), None)
        return {b: {k: v for k, v in row.items() if k != "collections"} for b, row in table.items()}

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

    def answers_dict(self) -> dict[str, Any]:
        """The ``answers`` object of the JSON: per mode, overall and per split."""
        data: dict[str, Any] = {
            "questions": len(self.on_topic()),
            "splits": {s: len(self.on_topic(s)) for s in self.splits()},
            "answer_grade": self.answer_grade,
        }
        for mode in (*MODES, "dense", "hybrid"):
            data[mode] = {
                **self.answers(mode),
                "by_split": {s: self.answers(mode, s) for s in self.splits()},
            }
        return data

    def to_dict(self, per_query: bool = False) -> dict[str, Any]:
        """The JSON document of `vault-ko eval --json`."""
        on, off = self.on_topic(), self.off_topic()
        data: dict[str, Any] = {
            "collection": self.collection,
            "kind": self.kind,
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
            "dense": self.retrieval("dense"),
            "hybrid": self.retrieval("hybrid"),
            "bm25_baseline": self.retrieval("baseline"),
            "bm25_whole_words": self.retrieval("baseline_whole_words"),
            "language": self.language,
            "long_notes": self.long_notes,
            "vectors_per_note": round(self.vectors / self.notes, 3) if self.notes else None,
            "default_retrieval": self.default_retrieval,
            "recommended_retrieval": self.recommended_retrieval(),
            "answers_by_mode": {m: dict(c) for m, c in self.answers_by_mode.items()},
            "answers": self.answers_dict(),
            "labels": {
                "on_topic": self.label_counts(on),
                "off_topic": self.label_counts(off),
                "off_topic_by_collection": {
                    n: self.label_counts(self.off_topic(n)) for n in self.offtopic
                },
            },
            "bands": self.bands(),
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
            "fallback_reach": _FALLBACK_REACH[self.kind],
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "warnings": list(self.warnings),
        }
        if per_query:
            data["per_query"] = [
                {
                    "id": o.query_id,
                    "group": o.group,
                    "split": o.split,
                    "text": o.text,
                    "label": o.label,
                    "top_cosine": o.top_cosine,
                    "z": o.z,
                    **{f"{m}_top10": list(o.notes.get(m, ())[:10]) for m in RANKED_MODES},
                    **{
                        f"{m}_subjects_top10": list(o.subjects.get(m, ())[:10])
                        for m in RANKED_MODES
                    },
                }
                for o in self.outcomes
            ]
        return data


_FALLBACK_REACH = {
    "beir": "finds documents with KO-DB's full-text index (BM25 on SQLite)",
    "vault": "finds notes with KO-DB's full-text index and subjects through them and the "
    "words of their names",
}


def _silenced(cosine: float | None, threshold: float) -> bool:
    # No hit at all is silence under every policy.
    return cosine is None or cosine < threshold


def _finite(values: Any) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


# -- the run ----------------------------------------------------------------------------


def eval_settings(vault: Path, state_dir: Path, overrides: Mapping[str, Any]) -> Settings:
    """Settings for the evaluated vault: the user's model choices, never their stores.

    The environment (and a judged vault's own vault-ko.toml) may name the model, device,
    batch size and folder globs; the KO-DB and graph are always the temporary ones (a
    user's VAULT_KO_KODB_URL must not receive test notes).
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


@dataclass(frozen=True)
class _Question:
    id: str
    text: str
    group: str
    split: str | None = None


@dataclass(frozen=True)
class _Plan:
    """What one run asks and how answers map to judged ids."""

    name: str
    kind: str
    questions: tuple[_Question, ...]
    offtopic: tuple[str, ...]
    answer_grade: int
    warnings: tuple[str, ...]


def run_eval(
    collection: Collection,
    offtopic: Sequence[tuple[str, Sequence[Query]]] = (),
    *,
    apps: AppFactory,
    overrides: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    workdir: str | Path | None = None,
) -> EvalReport:
    """Build a temporary vault from ``collection``, run every query, measure, clean up.

    ``apps`` makes the composition root over the temporary stores (the shell passes
    ``pipeline.app.App``). ``offtopic`` holds (name, queries) of other collections: those
    queries are only labelled. ``overrides`` are settings such as ``embed_model``.
    ``workdir`` is the parent of the temporary folder (default: the system's temp dir).
    """
    say = progress or (lambda _msg: None)
    judged = collection.judged_queries()
    plan = _Plan(
        collection.name,
        "beir",
        (
            *(_Question(q.id, q.text, "on_topic") for q in judged),
            *_offtopic_questions(offtopic),
        ),
        tuple(name for name, _ in offtopic),
        answer_grade=1,
        warnings=tuple(collection.warnings),
    )
    with tempfile.TemporaryDirectory(prefix="vault-ko-eval-", dir=workdir) as tmp:
        vault = Path(tmp) / "vault"
        t0 = time.perf_counter()
        path_to_doc = build_vault(collection, vault)
        built = time.perf_counter() - t0
        say(f"wrote {len(path_to_doc)} notes for {collection.name}")
        subject_to_doc = {normalize_text(s): d for d, s in doc_subjects(collection.docs).items()}
        qrels = {q.id: dict(collection.qrels[q.id]) for q in judged}

        def score(p: Pipeline) -> _Mapper:
            return _Mapper(
                note=path_to_doc.get,
                subject=lambda s: subject_to_doc.get(normalize_text(s)),
                note_qrels=qrels,
                subject_qrels=qrels,
            )

        return _run(
            plan,
            vault,
            Path(tmp) / "state",
            overrides or {},
            say,
            score,
            apps,
            docs=len(collection.docs),
            seconds={"build_vault": built},
        )


def run_vault_eval(
    vault: str | Path,
    judged: Sequence[JudgedQuestion],
    offtopic: Sequence[tuple[str, Sequence[Query]]] = (),
    *,
    judged_file: str = "",
    apps: AppFactory,
    overrides: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    workdir: str | Path | None = None,
) -> EvalReport:
    """Sync a copy of ``vault``'s notes into temporary stores, ask every judged question,
    measure the answers' subjects and notes against the judgements, clean up.

    The vault folder is only read. A judged subject that the vault's KO-DB does not hold
    is reported in ``warnings`` (a misspelt judgement would silently score zero).
    """
    say = progress or (lambda _msg: None)
    folder = Path(vault).expanduser().resolve()
    questions = tuple(
        _Question(f"{judged_file or 'judged'}:{j.line}", j.question, "on_topic", j.split)
        for j in judged
    )
    plan = _Plan(
        folder.name,
        "vault",
        (*questions, *_offtopic_questions(offtopic)),
        tuple(name for name, _ in offtopic),
        answer_grade=ANSWER_GRADE,
        warnings=(),
    )

    def score(p: Pipeline) -> _Mapper:
        own = {path: normalize_text(n.subject or n.title) for path, n in p.kodb.notes().items()}
        with_notes = set(own.values())
        by_path = {normalize_text(path): subject for path, subject in own.items()}
        subject_qrels = {
            q.id: grades_by_subject(j.relevant, by_path)
            for q, j in zip(questions, judged, strict=True)
        }
        return _Mapper(
            note=own.get,
            subject=normalize_text,
            note_qrels={
                q: {s: g for s, g in rel.items() if s in with_notes}
                for q, rel in subject_qrels.items()
            },
            subject_qrels=subject_qrels,
            known=set(p.kodb.subject_norms()),
            names={s: j.names[s] for j in judged for s in j.relevant},
        )

    with tempfile.TemporaryDirectory(prefix="vault-ko-eval-", dir=workdir) as tmp:
        return _run(
            plan,
            folder,
            Path(tmp) / "state",
            overrides or {},
            say,
            score,
            apps,
            docs=0,
            seconds={},
        )


def grades_by_subject(relevant: Mapping[str, int], by_path: Mapping[str, str]) -> dict[str, int]:
    """A judgement's grades by subject: a key naming a note's path (``meetings/x.md``, for
    vaults whose notes' names say little, and judged sets that must not quote them) counts
    as that note's own subject; a subject graded twice keeps its better grade."""
    out: dict[str, int] = {}
    for key, grade in relevant.items():
        subject = by_path.get(key, key) if key.endswith(NOTE_SUFFIX) else key
        out[subject] = max(out.get(subject, 0), grade)
    return out


def _offtopic_questions(offtopic: Sequence[tuple[str, Sequence[Query]]]) -> list[_Question]:
    return [_Question(q.id, q.text, name) for name, queries in offtopic for q in queries]


@dataclass(frozen=True)
class _Mapper:
    """How one run's answers become judged ids."""

    note: Callable[[str], str | None]  # note path -> id
    subject: Callable[[str], str | None]  # subject display name -> id
    note_qrels: Mapping[str, Mapping[str, int]]
    subject_qrels: Mapping[str, Mapping[str, int]]
    known: set[str] | None = None  # ids a judgement may name (None: any)
    names: Mapping[str, str] = field(default_factory=dict)

    def notes(self, paths: Iterable[str]) -> tuple[str, ...]:
        return first_occurrences(i for p in paths if (i := self.note(p)) is not None)

    def subjects(self, answer: Answer) -> tuple[str, ...]:
        return first_occurrences(
            i for s in answer.subjects if (i := self.subject(s.subject)) is not None
        )


def _run(
    plan: _Plan,
    vault: Path,
    state_dir: Path,
    overrides: Mapping[str, Any],
    say: Progress,
    mapper: Callable[[Pipeline], _Mapper],
    apps: AppFactory,
    *,
    docs: int,
    seconds: dict[str, float],
) -> EvalReport:
    base = eval_settings(vault, state_dir, overrides)
    t0 = time.perf_counter()
    # The throwaway graph is sized by the model, so here the model comes first.
    models = apps(base)
    embedder = models.load_model(before_stores=True)
    seconds["load_model"] = time.perf_counter() - t0
    say(f"model {embedder.model_id} ({embedder.dims}d)")
    local = models.local_graph()
    try:
        t0 = time.perf_counter()
        local.up(dims=int(embedder.dims), settings=base)
        seconds["graph_up"] = time.perf_counter() - t0
        settings = local.settings_for(base)
        say(f"local graph up at {settings.graph_url}")
        return _measure(plan, settings, embedder, mapper, apps, seconds, say, docs)
    finally:
        local.down()
        say("local graph stopped")


def _measure(
    plan: _Plan,
    settings: Settings,
    embedder: Any,
    mapper: Callable[[Pipeline], _Mapper],
    apps: AppFactory,
    seconds: dict[str, float],
    say: Progress,
    docs: int,
) -> EvalReport:
    """Sync the vault into the running stores, ask every question, build the report."""
    from pipeline.query import QueryOptions
    from pipeline.sync import sync_vault

    warnings = list(plan.warnings)
    with apps(settings, embedder=embedder) as app:
        p = app.pipeline()
        t0 = time.perf_counter()
        synced = sync_vault(settings, app.kodb, app.graph, embedder, force_calibration=True)
        seconds["sync"] = time.perf_counter() - t0
        warnings += _skipped_warnings(synced)
        notes = len(p.kodb.notes())
        say(f"synced {notes} notes ({synced.embed.embedded} embedded); calibrated")
        calibration = _calibration_used(p.basis(), synced.calibration)
        ids = mapper(p)
        judged_ids = [q.id for q in plan.questions if q.group == "on_topic"]
        warnings += _unknown_subject_warnings(ids)

        t0 = time.perf_counter()
        # Rankings and labels are measured, not the excerpts people read (reading every
        # hit's note for one would only slow the run), nor a no_match's word pointer.
        default = QueryOptions.from_settings(settings, excerpts=False, word_matches=False)
        outcomes, answer_modes = _ask_all(plan, p, ids, default, say)
        seconds["queries"] = time.perf_counter() - t0
        say(f"ran {len(plan.questions)} queries")
        return EvalReport(
            collection=plan.name,
            offtopic=plan.offtopic,
            model=embedder.model_id,
            dims=int(embedder.dims),
            docs=docs or notes,
            notes=notes,
            calibration=calibration,
            outcomes=tuple(outcomes),
            qrels={q: dict(ids.note_qrels[q]) for q in judged_ids},
            seconds=dict(seconds),
            warnings=tuple(warnings),
            kind=plan.kind,
            subject_qrels={q: dict(ids.subject_qrels[q]) for q in judged_ids},
            answer_grade=plan.answer_grade,
            default_retrieval=default.retrieval,
            answers_by_mode=answer_modes,
            language=settings.vault_language,
            long_notes=settings.embed_long_notes,
            vectors=synced.embed.embedded + synced.embed.moved + synced.embed.passages,
        )


def _skipped_warnings(synced: SyncReport) -> list[str]:
    """A warning per note the sync did not ingest or did not embed."""
    warnings = [
        f"note {skipped.path} was not ingested: {skipped.reason}"
        for skipped in synced.ingest.skipped
    ]
    warnings += [f"note {path} was not embedded: {reason}" for path, reason in synced.embed.skipped]
    return warnings


def _unknown_subject_warnings(ids: _Mapper) -> list[str]:
    """A warning per judged subject the vault does not hold (it can never be ranked)."""
    if ids.known is None:
        return []
    unknown = sorted({s for rel in ids.subject_qrels.values() for s in rel} - ids.known)
    return [
        f"judged note {s!r} is not a note of this vault; it can never be ranked"
        if s.endswith(NOTE_SUFFIX)
        else f"judged subject {ids.names.get(s, s)!r} is not a subject of this vault; "
        "it can never be ranked"
        for s in unknown
    ]


def _ask_all(
    plan: _Plan, p: Pipeline, ids: _Mapper, default: Any, say: Progress
) -> tuple[list[QueryOutcome], dict[str, dict[str, int]]]:
    """Ask every question in every mode (stopping if a semantic answer was degraded) and
    rank the judged ones by the BM25 baseline: (each question's outcome, the answers'
    modes per retrieval mode)."""
    texts = [q.text for q in plan.questions]
    on = [i for i, q in enumerate(plan.questions) if q.group == "on_topic"]
    by_mode, subjects, answers, answer_modes = _run_modes(p, texts, on, default)
    _refuse_degraded(answer_modes, answers)
    baseline = _bm25_baseline(p, [texts[i] for i in on])
    whole = _bm25_baseline(p, [texts[i] for i in on], whole_words=True)
    say(f"answered {len(texts)} queries ({len(on)} on-topic) in every mode")
    outcomes = []
    for i, (q, answer) in enumerate(zip(plan.questions, answers, strict=True)):
        outcome = QueryOutcome(
            q.id,
            q.group,
            answer.relevance.label,
            answer.relevance.top_cosine,
            answer.relevance.z,
            split=q.split,
            text=q.text,
        )
        if q.group == "on_topic":
            ranked = {m: ids.notes(by_mode[m][i]) for m in RANKED_MODES}
            ranked["baseline"] = ids.notes(baseline[on.index(i)])
            ranked["baseline_whole_words"] = ids.notes(whole[on.index(i)])
            outcome = replace(
                outcome,
                notes=ranked,
                subjects={m: ids.subjects(subjects[m][i]) for m in RANKED_MODES},
            )
        outcomes.append(outcome)
    return outcomes, answer_modes


def _run_modes(
    p: Pipeline, texts: Sequence[str], on: Sequence[int], default: Any
) -> tuple[
    dict[str, dict[int, list[str]]],
    dict[str, dict[int, Answer]],
    list[Answer],
    dict[str, dict[str, int]],
]:
    """Every question answered as a user's query would be, in each retrieval mode; the
    judged ones also searched for ``HITS`` notes (recall@100). Returns the note paths per
    mode and question, the answers per mode and question, the default answers, and how
    many answers of each retrieval mode were semantic and how many degraded."""
    deep = {
        "dense": replace(default, retrieval="dense", hits=HITS, subjects=False),
        "hybrid": replace(default, retrieval="hybrid", hits=HITS, subjects=False),
        "fallback": replace(default, semantic=False, hits=HITS, subjects=False),
    }
    shown = {
        "dense": replace(default, retrieval="dense"),
        "hybrid": replace(default, retrieval="hybrid"),
        "fallback": replace(default, semantic=False),
    }
    cache: dict[bytes, list[Hit]] = {}

    def search(vectors: Any, k: int) -> Iterator[list[Hit]]:
        # One index search of HITS notes per question, shared by every run.
        for vector in vectors:
            key = vector.tobytes()
            if key not in cache:
                cache[key] = p.index_search(vector, max(HITS, k))
            yield cache[key][:k]

    judged = [texts[i] for i in on]
    notes: dict[str, dict[int, list[str]]] = {}
    subjects: dict[str, dict[int, Answer]] = {}
    modes: dict[str, Counter[str]] = {m: Counter() for m in RANKED_MODES}
    for mode in RANKED_MODES:
        deep_answers = p.ask_many(judged, deep[mode], search=search)
        notes[mode] = {i: [h.path for h in a.hits] for i, a in zip(on, deep_answers, strict=True)}
        shown_answers = p.ask_many(judged, shown[mode], search=search)
        subjects[mode] = dict(zip(on, shown_answers, strict=True))
        modes[mode].update(a.mode for a in (*deep_answers, *shown_answers))
    answers = p.ask_many(texts, default, search=search)
    modes[default.retrieval].update(a.mode for a in answers)
    by_mode = {m: {"semantic": c["semantic"], "fallback": c["fallback"]} for m, c in modes.items()}
    return notes, subjects, answers, by_mode


def _refuse_degraded(by_mode: Mapping[str, Mapping[str, int]], answers: Sequence[Answer]) -> None:
    """A semantic figure built from degraded answers would be a fallback figure under
    another name: say so and stop (the graph was down or timing out, e.g. on a loaded
    machine)."""
    lost = {m: c["fallback"] for m, c in by_mode.items() if m != "fallback" and c["fallback"]}
    if not lost:
        return
    reasons = Counter(a.degraded_reason for a in answers if a.mode == "fallback")
    reason = reasons.most_common(1)[0][0] if reasons else "unknown"
    counts = ", ".join(
        f"{n} of {sum(by_mode[m].values())} {m} answers" for m, n in sorted(lost.items())
    )
    raise EvalDegraded(
        f"eval: {counts} were degraded (most often: {reason}); their figures would be "
        "fallback figures, so none is reported. Run it again when the graph answers"
    )


def _bm25_baseline(
    p: Pipeline, questions: Sequence[str], *, whole_words: bool = False
) -> list[list[str]]:
    """The note paths a plain BM25 (the bm25s library, k1 1.5, b 0.75: title and body as one
    text, the same stemmed words and stop words as degraded mode) ranks first for each
    question: the yardstick of KO-DB's full-text ranking. ``whole_words``: over the notes'
    words unstemmed, read again from the vault (the index before stemming, beside it)."""
    import bm25s

    from pipeline.kodb import text as kodb_text

    if whole_words:
        indexed = _whole_words(p.settings)
        languages: tuple[str | None, ...] = (None,)
    else:
        indexed = p.kodb.note_texts()  # path -> (title words, body words), as KO-DB holds them
        languages = p.kodb.index_languages()  # the question is stemmed as the notes were
    paths = sorted(indexed)
    corpus = [f"{indexed[path][0]} {indexed[path][1]}".split() for path in paths]
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    out: list[list[str]] = []
    for question in questions:
        words = kodb_text.query_words(bridge.query_terms(question), languages)
        known = [w for w in words if w in retriever.vocab_dict]
        if not known or not paths:
            out.append([])
            continue
        k = min(HITS, len(paths))
        docs, scores = retriever.retrieve([known], k=k, show_progress=False)
        out.append([paths[d] for d, sc in zip(docs[0], scores[0], strict=True) if sc > 0])
    return out


def _whole_words(settings: Settings) -> dict[str, tuple[str, str]]:
    """Every note's title and body words as the index held them before stemming."""
    from pipeline.ingest import note_text
    from pipeline.kodb.text import index_text
    from pipeline.vault.parse import read_note
    from pipeline.vault.scan import scan_vault

    out: dict[str, tuple[str, str]] = {}
    for entry in scan_vault(settings):
        try:
            parsed = read_note(
                settings.vault, entry.path, entry.source_type, settings.vault_max_note_bytes
            )
        except InputError:  # not ingested either (the eval's warnings name it)
            continue
        text = note_text(parsed)
        out[entry.path] = (index_text(text.title), index_text(text.body))
    return out


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
