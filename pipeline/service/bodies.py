"""What the service answers with, as its OpenAPI schema declares it.

The answers themselves are made by ``render.to_dict`` (docs/answer-json.md) and sent as
they are; these models only describe them, so that a client and an OpenAPI fuzzer can hold
each 200 to a schema (an undeclared ``{}`` let any body pass). Every key is required and no
other is allowed: a key added to the answer without a line here fails the unit test that
validates real answers against these models, and Schemathesis' response check.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PrecisionBody(_Body):
    """What the label is measured to mean (docs/relevance.md)."""

    value: float | None
    n: int
    collections: int
    lowest: float | None


class RelevanceBody(_Body):
    label: Literal["strong", "moderate", "weak", "no_match", "unscored"]
    top_cosine: float | None
    z: float | None
    noise_floor: float | None
    sigma: float | None
    floor_cosine: float | None
    calibration: Literal["vault", "embedder-default", "none"]
    tight_vault: bool
    hint: str | None
    warning: str | None
    precision: PrecisionBody | None


SourceType = Literal["session", "wiki", "adr"]


class HitBody(_Body):
    path: str
    title: str
    source_type: SourceType
    cosine: float | None
    bm25: float | None
    excerpt: str | None
    status: str | None
    superseded_by: str | None
    date: str | None
    since_sync: Literal["edited", "deleted"] | None


class FactBody(_Body):
    predicate: str
    object: str
    confidence: float | None
    source_type: SourceType
    source_file: str


class SubjectBody(_Body):
    subject: str
    score: int
    source_count: int
    per_type: dict[str, int]
    total_facts: int
    raw_facts: int
    max_confidence: float | None
    best_cosine: float | None
    best_bm25: float | None
    band: str | None
    evidence: str | None
    status: str | None
    superseded_by: str | None
    crystal_ready: bool
    predicates: dict[str, int]
    facts: list[FactBody]


class TimeWindowBody(_Body):
    text: str
    from_: str = Field(alias="from")  # a Python keyword: the alias is the key
    to: str
    applied: bool
    undated: int
    outside: int


class RecencyBody(_Body):
    text: str
    within_sigma: float | None


class UnsyncedBody(_Body):
    changed: int
    added: int
    removed: int
    unreadable: int


class WordMatchBody(_Body):
    path: str
    title: str
    source_type: SourceType
    bm25: float | None


class AnswerBody(_Body):
    """One answer (docs/answer-json.md)."""

    schema_version: int
    query: str
    mode: Literal["semantic", "fallback"]
    degraded_reason: str | None
    relevance: RelevanceBody
    hits: list[HitBody]
    subjects: list[SubjectBody]
    time_window: TimeWindowBody | None
    recency: RecencyBody | None
    notice: str | None
    unsynced: UnsyncedBody | None
    word_matches: list[WordMatchBody]
    word_match_count: int | None
    timings_ms: dict[str, float]


class PackBody(AnswerBody):
    """One session's context pack: its id and prompt, then the answer's keys."""

    id: str
    prompt: str


class PacksBody(_Body):
    packs: list[PackBody]


class WatcherBody(_Body):
    running: bool
    pid: int | None
    last_run: float | None
    lag_s: float | None


class HealthBody(_Body):
    """``/healthz``: alive, and what it holds; ``kodb`` is "ok" or why KO-DB's file is not."""

    status: Literal["ok"]
    kodb: str
    vault: str
    pid: int
    version: str
    model_loaded: bool
    warm_vectors: int
    warm_facts: int
    watcher: WatcherBody


class FreshnessCounts(_Body):
    fresh: int | None
    missing: int | None
    stale: int | None
    orphaned: int | None
    model_mismatch: int | None


class FreshnessNotes(_Body):
    missing: list[str] | None
    stale: list[str] | None
    orphaned: list[str] | None
    model_mismatch: list[str] | None


class SkippedBody(_Body):
    path: str
    reason: str


class CoverageBody(_Body):
    notes: int
    fresh: int | None
    missing: int | None
    stale: int | None
    orphaned: int | None
    model_mismatch: int | None
    skipped: int | None
    coverage: float | None


class CalibrationCheckBody(_Body):
    status: Literal["ok", "missing", "outdated", "unknown"]
    reasons: list[str]
    checked: bool
    embedder: str | None
    dims: int | None
    probe_set_version: int | None
    notes_at_calibration: int | None
    measured_at: float | None
    age_seconds: float | None


class GraphCheckBody(_Body):
    up: bool | None
    checked: bool
    url: str | None
    dialect: str | None
    agent: str | None
    latency_ms: float | None
    reason: str | None
    detail: str | None
    notes: int | None


class KodbCheckBody(_Body):
    up: bool | None
    checked: bool
    url: str
    dialect: str | None
    reason: str | None
    registry_notes: int
    facts: int
    orphan_facts: int
    orphan_fact_files: list[str]


class ThresholdsBody(_Body):
    max_stale: int
    max_stale_ratio: float
    check_calibration: bool


class FreshnessBody(_Body):
    """``/freshness``: the document of ``vault-ko freshness --json`` (docs/freshness.md)."""

    status: Literal["fresh", "stale", "error"]
    reasons: list[str]
    vault: str
    model: str | None
    dims: int | None
    notes_on_disk: int
    counts: FreshnessCounts
    counts_unknown_reason: str | None
    notes: FreshnessNotes
    skipped: list[SkippedBody]
    oldest_stale_seconds: float | None
    by_type: dict[str, CoverageBody]
    calibration: CalibrationCheckBody
    graph: GraphCheckBody
    kodb: KodbCheckBody
    fallback_answers: int
    watcher: WatcherBody
    thresholds: ThresholdsBody
    compared: bool
    reread: int
    warnings: list[str]
    checked_at: float
    seconds: float
