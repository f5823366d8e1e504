"""Frozen value types that travel through the pipeline.

Validation happens at the edges (ingest, fact import, config); inside the pipeline these
objects are trusted and immutable.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final, Literal

SourceType = Literal["session", "wiki", "adr"]
SOURCE_TYPES: tuple[SourceType, ...] = ("session", "wiki", "adr")

Mode = Literal["semantic", "fallback"]
Label = Literal["strong", "moderate", "weak", "no_match", "unscored"]
Band = Literal["strong", "moderate", "weak"]
CalibrationSource = Literal["vault", "embedder-default", "none"]
#: Why a subject is a candidate of an answer (see bridge.py): a hit note is its own note,
#: a hit's title names it (the seed's LIKE bridge), several of the best hits link to it,
#: or (degraded mode) its name holds words of the question.
Evidence = Literal["own", "title", "mentioned", "words", "successor"]

#: The predicate of a note's title fact: its object may only restate the subject's name.
TITLE_PREDICATE: Final = "title"
#: The order ranking prefers a subject's facts in after the evidence that matched the
#: question (``rank.representative_facts``): (Fact field, descending). KO-DB keeps each
#: partition of a subject's facts in this order (SQL windows, the stored lists, the
#: resident copy's columns), so the first ``n`` of each partition hold every fact the
#: ranking can pick among them.
POOL_ORDER: Final = (
    ("confidence", True),
    ("predicate", False),
    ("source_type", False),
    ("source_file", False),
    ("object", False),
    ("extractor", False),
)
#: What a sample partitions a subject's facts by; ``title_object`` is the object under
#: ``TITLE_PREDICATE`` (a fact that may restate the name is never crowded out) and nothing
#: otherwise. A question's sample also parts the facts of each of its evidence files.
SAMPLE_PARTITION: Final = ("predicate", "source_type", "title_object")


#: Predicates that say what the vault holds about a subject, in the order an answer
#: prefers them: the decision, its reasons and consequences, what the note says, the
#: decision about it, where it stands, when, other names, and last the sentence another
#: note mentions it in (``context``: on the judged sets it answers the question more often
#: than any other property; docs/ranking.md has the measurement).
INFORMATIVE_PREDICATES: Final = (
    "decision",
    "decisions",
    "rationale",
    "consequences",
    "summary",
    "decided_in",
    "status",
    "adr_status",
    "superseded_by",
    "supersedes",
    "date",
    "alias",
    "context",
)
#: Predicates that only say where a subject appears: links and mentions, tags, headings,
#: web links, the note's title. An answer shows them after the others.
STRUCTURAL_PREDICATES: Final = frozenset(
    {"mentioned_in", "links_to", "tagged", "section", "references", TITLE_PREDICATE}
)
_INFORMATIVE_RANK: Final = {p: i for i, p in enumerate(INFORMATIVE_PREDICATES)}


def predicate_preference(predicate: str) -> tuple[int, int]:
    """(tier, rank) of a predicate when an answer chooses facts: tier 0 informative (ranked
    as listed), 1 any other property (an owner, the participants), 2 structural. A
    function of the predicate alone, so it is the same for every fact of a partition."""
    key = predicate.casefold()
    rank = _INFORMATIVE_RANK.get(key)
    if rank is not None:
        return (0, rank)
    return (2, 0) if key in STRUCTURAL_PREDICATES else (1, 0)


def pool_key(item: Any, get: Callable[[Any, str], Any] = getattr) -> tuple[Any, ...]:
    """``POOL_ORDER`` as a sort key of a Fact (or, with ``get=operator.getitem``, of a
    facts row)."""
    return tuple(-get(item, name) if desc else get(item, name) for name, desc in POOL_ORDER)


#: The extractor name of the facts ingest derives from notes. Ingest replaces and deletes
#: the facts of this extractor only, so no other source may use it (facts import refuses it).
INGEST_EXTRACTOR = "ingest"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (what Python makes of bytes that were not UTF-8 in an
    argument, or of a ``"\\ud800"`` JSON escape) replaced by U+FFFD: they cannot be encoded,
    so the tokenizer, the databases and every output would refuse them."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def normalize_text(text: str) -> str:
    """NFC + Unicode case folding: the form every subject comparison uses.

    Done in Python because SQLite's LIKE folds ASCII only and PostgreSQL's depends on the
    cluster locale; storing this form makes both databases agree with a plain Python scan.
    """
    return unicodedata.normalize("NFC", text).casefold()


def fact_key(subject: str, predicate: str, obj: str, source_file: str, extractor: str) -> str:
    """Stable identity of a fact, so re-ingesting or re-importing is idempotent.

    The extractor is part of it: a fact belongs to whoever stated it, so ingest replacing
    its own facts of a note never deletes an imported fact that says the same thing.
    The parts are JSON-encoded (unambiguous, unlike joining them with a separator that a
    part may contain) and never equal the keys KO-DB schema 3 stored, which the
    migration that re-keys existing rows relies on.
    """
    parts = [unicodedata.normalize("NFC", p) for p in (subject, predicate, obj, source_file)]
    parts.append(unicodedata.normalize("NFC", extractor))
    return hashlib.sha256(json.dumps(parts).encode("ascii")).hexdigest()


@dataclass(frozen=True)
class Fact:
    subject: str
    predicate: str
    object: str
    confidence: float
    source_type: SourceType
    source_file: str
    extractor: str = "import"

    @cached_property
    def key(self) -> str:
        return fact_key(self.subject, self.predicate, self.object, self.source_file, self.extractor)

    def with_key(self, key: str) -> Fact:
        """This fact, its ``key`` already computed by the caller from the same fields (an
        ingest hashes some 600,000 facts; each once is enough)."""
        self.__dict__["key"] = key  # cached_property's own slot
        return self

    @property
    def subject_norm(self) -> str:
        return normalize_text(self.subject)


@dataclass(frozen=True)
class Note:
    """A vault note as the registry knows it (no body)."""

    path: str  # vault-relative, POSIX separators
    title: str
    source_type: SourceType
    content_hash: str
    mtime: float
    bytes: int
    subject: str | None = None  # the note's own subject; None: the same as its title
    # its first paragraph that is no template line, clipped (the excerpt answers fall back to)
    summary: str | None = None
    extractor_version: int | None = None  # the extraction rules its facts came from
    date: str | None = None  # ISO day: frontmatter date/created, the file name, an ADR Date:
    text_language: str | None = None  # the vault language its full text was indexed under
    # whether it was private when written (its opening keys are then not kept); None: a row
    # written before migration 16
    private: bool | None = None


@dataclass(frozen=True)
class NoteStamp:
    """A registry row's file stamp: what telling an edited note from an unchanged one needs."""

    mtime: float
    bytes: int
    content_hash: str


@dataclass(frozen=True)
class NoteText:
    """What the full-text index holds of a note: its names (title, aliases) and its body."""

    path: str
    title: str
    body: str
    language: str | None = None  # its stemmer (kodb/text.py); None: whole words


@dataclass(frozen=True)
class Hit:
    """A note that answers a search: by meaning (``cosine``), by words (``bm25``, larger is
    better; degraded mode and hybrid retrieval), or both."""

    path: str
    title: str
    source_type: SourceType
    cosine: float | None
    excerpt: str | None = None  # the note's summary from the registry, for people to read
    bm25: float | None = None
    status: str | None = None  # its decision's status (pipeline/succession.py), if it is one
    superseded_by: str | None = None  # the note of the decision that replaced it
    date: str | None = None  # the note's ISO date (Note.date), None when it has none
    # Hybrid retrieval: written in a language the model does not read, so its cosine says
    # little and the words found it (fusion.relative_scores' ``unjudged``).
    unread: bool = False
    #: "edited" or "deleted" when its file changed since the last sync (an answer that
    #: compares the vault with KO-DB, ``vault/edits.since_sync``): it says the old text.
    since_sync: str | None = None


@dataclass(frozen=True)
class Candidate:
    """A subject the bridge nominates, and the evidence that makes it relevant.

    ``cosine`` is that of the hit that makes it relevant (None in degraded mode, where
    ``bm25`` is that hit's word score), ``path`` that hit's note; ``words`` counts the
    question words its name matches (degraded mode's second source of candidates).
    """

    subject_norm: str
    evidence: Evidence
    cosine: float | None = None
    path: str | None = None
    words: int = 0
    bm25: float | None = None  # that hit's word score (degraded mode), larger is better
    #: Hybrid retrieval: the cosine its hit's fused rank stands for (``bridge.rank_cosines``),
    #: which places it among comparable subjects instead of ``cosine``; None: ``cosine``.
    rank_cosine: float | None = None


@dataclass(frozen=True)
class FactView:
    predicate: str
    object: str
    confidence: float
    source_type: SourceType
    source_file: str


@dataclass(frozen=True)
class SubjectRank:
    subject: str
    score: int
    source_count: int
    per_type: dict[str, int]
    total_facts: int
    raw_facts: int
    max_confidence: float
    best_cosine: float | None  # the cosine of the hit that makes it relevant
    crystal_ready: bool
    predicates: dict[str, int]
    facts: tuple[FactView, ...]
    band: Band | None = None  # z-band of best_cosine (None in degraded mode)
    evidence: Evidence | None = None
    best_bm25: float | None = None  # degraded mode: the word score of that hit
    status: str | None = None  # its decision's status (pipeline/succession.py), if it is one
    superseded_by: str | None = None  # the subject of the decision that replaced it


@dataclass(frozen=True)
class SubjectSummary:
    """What ranking needs of one subject's facts, without all of them (kodb ``subject_summaries``).

    The counts are over every fact of the subject (that the caller may see); ``sample`` holds
    the facts representative_facts can pick (rank.py says which), sorted as
    ``facts_for_subjects`` sorts them.
    """

    subject_norm: str
    spellings: dict[str, int]  # subject as written -> facts
    source_count: int  # distinct source files
    per_type: dict[str, int]  # source type -> distinct source files
    predicates: dict[str, int]  # predicate -> facts
    raw_facts: int
    max_confidence: float
    sample: tuple[Fact, ...]


@dataclass(frozen=True)
class Calibration:
    embedder: str
    dims: int
    probe_set_version: int
    noise_floor: float
    sigma: float
    mu: float
    n_notes: int
    n_pairs: int
    vault_notes_at_calibration: int
    measured_at: float  # unix seconds


@dataclass(frozen=True)
class BandPrecision:
    """What a relevance band is measured to mean for one embedding model: ``value``, the
    share of judged answers in the band whose top note was relevant, over ``n`` answers
    from ``collections`` judged collections (``vault-ko eval --fit-bands``), each counted
    equally; ``lowest``, that share on the hardest of them (None: not measured)."""

    value: float
    n: int
    collections: int
    lowest: float | None = None


@dataclass(frozen=True)
class Relevance:
    label: Label
    top_cosine: float | None
    z: float | None
    noise_floor: float | None
    sigma: float | None
    floor_cosine: float | None
    calibration: CalibrationSource
    tight_vault: bool
    hint: str | None = None
    warning: str | None = None
    precision: BandPrecision | None = None  # what the label is measured to mean

    @classmethod
    def unmeasured(cls, label: Label, warning: str) -> Relevance:
        """A label no cosine was measured for (degraded mode, a question about nothing)."""
        return cls(label, None, None, None, None, None, "none", False, None, warning)


@dataclass(frozen=True)
class Answer:
    query: str
    mode: Mode
    degraded_reason: str | None
    relevance: Relevance
    hits: tuple[Hit, ...]
    subjects: tuple[SubjectRank, ...]
    timings_ms: dict[str, float] = field(default_factory=dict)
    notice: str | None = None  # why a preset found nothing ("no session notes in this vault")
    time_window: TimeWindow | None = None  # the period the question asks about
    recency: Recency | None = None  # the question asks for the newest notes
    #: Notes edited since the last sync, which the answer cannot see (None: not checked,
    #: as a resident service or watcher keeps the stores current).
    unsynced: UnsyncedEdits | None = None
    #: In a no_match or weak answer, at most three notes holding every word of the question
    #: that it does not show (a name the model cannot place, say), best first by BM25: not
    #: what the answer found, a pointer.
    word_matches: tuple[Hit, ...] = ()
    #: How many notes hold every word of the question, where ``word_matches`` lists some:
    #: in a no_match answer up to ``WORD_POOL`` + 1 ("more than WORD_POOL"), of which it
    #: lists the best three; in a weak one, the one to three it lists. None otherwise.
    word_match_count: int | None = None


#: A no_match answer counts the notes holding every word of the question up to this many
#: (one more reads "more than"), and names the best three of them: a name many notes hold
#: (a team's lead) is no_match by meaning all the same, and "the vault knows nothing of it"
#: would be false.
WORD_POOL: Final = 100

#: The reason of an answer by words that the caller asked for (the CLI's --no-semantic,
#: the service's and MCP's semantic=false): not degraded, so never counted as a fallback.
WORDS_ASKED: Final = "word search asked for (semantic search off)"


@dataclass(frozen=True)
class UnsyncedEdits:
    """Notes on disk that differ from what answers are made of (``vault/edits.py``):
    ``changed`` and ``added`` since the last sync, and ``removed`` (still answered from);
    and ``unreadable``, those sync skips as they stand (bad input, too big), which no sync
    brings into an answer until they are mended (not in ``total``: not edits to apply)."""

    changed: int = 0
    added: int = 0
    removed: int = 0
    unreadable: int = 0

    @property
    def total(self) -> int:
        return self.changed + self.added + self.removed


@dataclass(frozen=True)
class TimeWindow:
    """The days a question asks about (``timewindow.parse_window``): ``text`` is the phrase
    it was read from, ``start``..``end`` inclusive ISO days. ``applied``: the answer's notes
    were chosen by it (False when no note is dated within it); ``undated``: notes without a
    date it kept, marked so; ``outside``: dated notes it left out."""

    text: str
    start: str
    end: str
    applied: bool = True
    undated: int = 0
    outside: int = 0

    def holds(self, day: str) -> bool:
        return self.start <= day <= self.end


@dataclass(frozen=True)
class Recency:
    """A question asking for the newest notes ("the latest on X", "the last meeting",
    "legutóbb"; ``timewindow.asks_latest``): ``text`` is the phrase it was read from. The
    answer's notes are then the newest first among the notes within ``within_sigma`` σ of
    the best cosine; ``within_sigma`` None: among all the notes found, when the question
    names nothing but the latest ("what happened at the last meeting?")."""

    text: str
    within_sigma: float | None


def summarize(facts: Sequence[Fact]) -> SubjectSummary:
    """The summary of one subject's facts (all of them), computed in Python: what
    ``KoDB.subject_summaries`` computes in SQL, with every fact as the sample. Here, beside
    the value it makes, so the ranking and the KO-DB views (privacy's, the batch memo's)
    share it without depending on each other."""
    files_by_type: dict[str, set[str]] = defaultdict(set)
    for f in facts:
        files_by_type[f.source_type].add(f.source_file)
    return SubjectSummary(
        subject_norm=facts[0].subject_norm,
        spellings=dict(Counter(f.subject for f in facts)),
        source_count=len({f.source_file for f in facts}),
        per_type={t: len(files) for t, files in files_by_type.items()},
        predicates=dict(Counter(f.predicate for f in facts)),
        raw_facts=len(facts),
        max_confidence=max(f.confidence for f in facts),
        sample=tuple(facts),
    )


def summaries_from_facts(facts: Iterable[Fact]) -> dict[str, SubjectSummary]:
    """subject_norm -> ``summarize`` of its facts (test doubles and fallbacks use it)."""
    groups: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        groups[f.subject_norm].append(f)
    return {norm: summarize(group) for norm, group in groups.items()}
