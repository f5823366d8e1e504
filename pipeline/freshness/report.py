"""The records of a freshness check: its options, each note's state, coverage per source
type, the calibration, graph and KO-DB checks, and the report whose ``to_dict`` is the
``--json`` contract (keys pinned by the tests)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pipeline.config import Settings
from pipeline.errors import EXIT_FAILURE, EXIT_OK, EXIT_UNAVAILABLE
from pipeline.ingest import SkippedNote
from pipeline.model import Calibration

Status = Literal["fresh", "stale", "error"]
CalibrationStatus = Literal["ok", "missing", "outdated", "unknown"]

#: The note states a note can be in, in the order the report lists them.
NOTE_STATES: tuple[str, ...] = ("fresh", "missing", "stale", "orphaned", "model_mismatch")
#: The states that make a note out of date (everything but fresh).
OUT_OF_DATE: tuple[str, ...] = ("missing", "stale", "orphaned", "model_mismatch")


@dataclass(frozen=True)
class FreshnessOptions:
    """Thresholds of one check. The defaults make any out-of-date note stale."""

    max_stale: int = 0  # out-of-date notes tolerated ...
    max_stale_ratio: float = 0.0  # ... or this share of all notes: either one relaxes
    check_calibration: bool = True  # a missing or outdated calibration counts as stale
    advance_fallback_mark: bool = True  # the next check counts fallbacks from now on

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> FreshnessOptions:
        """Defaults from settings.freshness_max_stale / freshness_max_stale_ratio; overrides
        that are None keep them."""
        base = cls(
            max_stale=settings.freshness_max_stale,
            max_stale_ratio=settings.freshness_max_stale_ratio,
        )
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


@dataclass(frozen=True)
class DiskNote:
    """A note on disk with its current content hash."""

    path: str
    source_type: str
    content_hash: str
    mtime: float


@dataclass(frozen=True)
class Classification:
    """Note paths by state (each sorted) and when each stale or missing note went stale."""

    fresh: tuple[str, ...]
    missing: tuple[str, ...]
    stale: tuple[str, ...]
    orphaned: tuple[str, ...]
    model_mismatch: tuple[str, ...]
    stale_since: Mapping[str, float] = field(default_factory=dict)

    def paths(self, state: str) -> tuple[str, ...]:
        """The note paths in one state."""
        return getattr(self, state)  # type: ignore[no-any-return]

    def counts(self, states: Iterable[str] = OUT_OF_DATE) -> dict[str, int]:
        """Notes per state, for these states (by default the out-of-date ones)."""
        return {s: len(self.paths(s)) for s in states}


@dataclass(frozen=True)
class TypeCoverage:
    """One source type's notes on disk and how many of them the graph has current."""

    source_type: str
    notes: int  # on disk, skipped ones included
    fresh: int
    missing: int
    stale: int
    orphaned: int  # graph nodes of this type whose note is gone
    model_mismatch: int
    skipped: int
    compared: bool = True  # False: the graph was not read, so coverage is unknown
    read: bool = True  # False: the notes were not read, so skipped is unknown

    @property
    def coverage(self) -> float | None:
        """Share of the readable notes on disk that are embedded and current (1.0 if there
        are none; None when the graph could not be compared)."""
        if not self.compared:
            return None
        readable = self.notes - self.skipped
        return self.fresh / readable if readable > 0 else 1.0

    def to_dict(self) -> dict[str, Any]:
        """Counts the check could not know are None, never a 0 that reads as "none"."""
        graph = {
            state: getattr(self, state) if self.compared else None
            for state in ("fresh", "missing", "stale", "orphaned", "model_mismatch")
        }
        return {
            "notes": self.notes,
            **graph,
            "skipped": self.skipped if self.read else None,
            "coverage": None if self.coverage is None else round(self.coverage, 4),
        }


@dataclass(frozen=True)
class CalibrationCheck:
    """The stored calibration and whether it still fits the model and the vault."""

    status: CalibrationStatus
    reasons: tuple[str, ...]
    checked: bool  # False with --no-calibration-check: reported, not counted as stale
    calibration: Calibration | None = None
    age_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        cal = self.calibration
        return {
            "status": self.status,
            "reasons": list(self.reasons),
            "checked": self.checked,
            "embedder": cal.embedder if cal else None,
            "dims": cal.dims if cal else None,
            "probe_set_version": cal.probe_set_version if cal else None,
            "notes_at_calibration": cal.vault_notes_at_calibration if cal else None,
            "measured_at": cal.measured_at if cal else None,
            "age_seconds": _round(self.age_seconds),
        }


@dataclass(frozen=True)
class GraphCheck:
    """The graph's reachability, latency and size as the check saw them."""

    up: bool
    url: str | None
    dialect: str | None
    agent: str | None
    latency_ms: float | None
    reason: str | None  # why it is down, in words
    notes: int | None = None  # Note nodes in the graph (None when not read)
    detail: str | None = None  # the driver's own error text, when it says more than reason
    checked: bool = True  # False: the check stopped before it (up is then not known)

    def to_dict(self) -> dict[str, Any]:
        return {
            "up": self.up if self.checked else None,
            "checked": self.checked,
            "url": self.url,
            "dialect": self.dialect,
            "agent": self.agent,
            "latency_ms": _round(self.latency_ms),
            "reason": self.reason,
            "detail": self.detail,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class KodbCheck:
    """KO-DB's reachability and its facts whose source file is gone."""

    up: bool
    url: str
    dialect: str | None = None
    reason: str | None = None
    registry_notes: int = 0
    facts: int = 0
    orphan_facts: int = 0  # facts whose source file no longer exists
    orphan_fact_files: tuple[str, ...] = ()
    checked: bool = True  # False: the check stopped before it (up is then not known)

    def to_dict(self) -> dict[str, Any]:
        return {
            "up": self.up if self.checked else None,
            "checked": self.checked,
            "url": self.url,
            "dialect": self.dialect,
            "reason": self.reason,
            "registry_notes": self.registry_notes,
            "facts": self.facts,
            "orphan_facts": self.orphan_facts,
            "orphan_fact_files": list(self.orphan_fact_files),
        }


@dataclass(frozen=True)
class FreshnessReport:
    """The outcome of one freshness check (``to_dict`` is the ``--json`` contract)."""

    status: Status
    reasons: tuple[str, ...]  # why stale or error; empty when fresh
    vault: str
    model: str | None
    dims: int | None
    notes_on_disk: int
    classification: Classification
    skipped: tuple[SkippedNote, ...]
    oldest_stale_seconds: float | None
    by_type: tuple[TypeCoverage, ...]
    calibration: CalibrationCheck
    graph: GraphCheck
    kodb: KodbCheck
    fallback_answers: int
    reread: int  # notes read because their mtime or size left the registry's
    compared: bool  # False when the graph or registry could not be read
    options: FreshnessOptions
    checked_at: float
    seconds: float
    warnings: tuple[str, ...] = ()
    # Why the note counts are unknown (the graph, KO-DB or the model could not be read);
    # None when they were compared.
    unknown_reason: str | None = None
    notes_read: bool = True  # False: the notes on disk were not read, skipped is unknown
    # The vault's watcher (``watch.watcher_status``): running, pid, last_run, lag_s.
    watcher: dict[str, Any] | None = None

    @classmethod
    def failed(
        cls,
        reason: str,
        *,
        vault: str,
        options: FreshnessOptions | None = None,
        now: float | None = None,
    ) -> FreshnessReport:
        """A report for a check that could not run at all (bad settings, an unexpected
        error): status "error", nothing compared."""
        return cls(
            status="error",
            reasons=(reason,),
            vault=vault,
            model=None,
            dims=None,
            notes_on_disk=0,
            classification=Classification((), (), (), (), ()),
            skipped=(),
            oldest_stale_seconds=None,
            by_type=(),
            calibration=CalibrationCheck("unknown", ("not checked",), checked=False),
            graph=GraphCheck(False, None, None, None, None, "not checked", checked=False),
            kodb=KodbCheck(up=False, url="", reason="not checked", checked=False),
            fallback_answers=0,
            reread=0,
            compared=False,
            options=options or FreshnessOptions(),
            checked_at=time.time() if now is None else now,
            seconds=0.0,
            unknown_reason=reason,
            notes_read=False,
        )

    @property
    def counts(self) -> dict[str, int]:
        """Out-of-date notes per state."""
        return self.classification.counts()

    @property
    def out_of_date(self) -> int:
        """All out-of-date notes."""
        return sum(self.counts.values())

    @property
    def exit_code(self) -> int:
        """0 fresh, 1 stale, 2 error."""
        return {"fresh": EXIT_OK, "stale": EXIT_FAILURE}.get(self.status, EXIT_UNAVAILABLE)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``vault-ko freshness --json`` (keys are a contract).

        Counts the check could not know (the graph was down) are null, and
        ``counts_unknown_reason`` says why; their path lists are null too."""
        counts: dict[str, int | None] = {**self.counts, "fresh": len(self.classification.fresh)}
        if not self.compared:
            counts = dict.fromkeys(counts)
        return {
            "status": self.status,
            "reasons": list(self.reasons),
            "vault": self.vault,
            "model": self.model,
            "dims": self.dims,
            "notes_on_disk": self.notes_on_disk,
            "counts": counts,
            "counts_unknown_reason": None if self.compared else self.unknown_reason,
            "notes": {
                s: list(self.classification.paths(s)) if self.compared else None
                for s in OUT_OF_DATE
            },
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "oldest_stale_seconds": _round(self.oldest_stale_seconds),
            "by_type": {t.source_type: t.to_dict() for t in self.by_type},
            "calibration": self.calibration.to_dict(),
            "graph": self.graph.to_dict(),
            "kodb": self.kodb.to_dict(),
            "fallback_answers": self.fallback_answers,
            "watcher": self.watcher
            or {"running": False, "pid": None, "last_run": None, "lag_s": None},
            "thresholds": {
                "max_stale": self.options.max_stale,
                "max_stale_ratio": self.options.max_stale_ratio,
                "check_calibration": self.options.check_calibration,
            },
            "compared": self.compared,
            "reread": self.reread,
            "warnings": list(self.warnings),
            "checked_at": self.checked_at,
            "seconds": round(self.seconds, 3),
        }


def _round(value: float | None, digits: int = 3) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)
