"""The pure decisions of a freshness check: no disk, no store, no clock of its own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pipeline.calibrate import outdated_reasons
from pipeline.config import Settings
from pipeline.freshness.report import (
    NOTE_STATES,
    CalibrationCheck,
    CalibrationStatus,
    Classification,
    DiskNote,
    FreshnessOptions,
    Status,
    TypeCoverage,
)
from pipeline.ingest import SkippedNote
from pipeline.model import SOURCE_TYPES, Calibration
from pipeline.vault.scan import ScannedFile

if TYPE_CHECKING:
    from pipeline.graph import NoteState


def classify(
    disk: Mapping[str, DiskNote],
    states: Mapping[str, NoteState],
    *,
    model: str,
    dims: int | None,
    text_version: int | None = None,
    present: Iterable[str] = (),
) -> Classification:
    """Put every note on disk in one state and find the orphans (see the module docstring).

    ``present`` names files that exist but were not classified (skipped bad input): their
    nodes are not orphans. ``dims`` None compares the model id only; a node embedded under
    other ``text_version`` rules (when given) is stale like an edited note.
    """
    buckets: dict[str, list[str]] = {s: [] for s in NOTE_STATES}
    stale_since: dict[str, float] = {}
    for path in sorted(disk):
        note, state = disk[path], states.get(path)
        if state is None:
            buckets["missing"].append(path)
            stale_since[path] = note.mtime
        elif state.model != model or (dims is not None and state.dims != dims):
            buckets["model_mismatch"].append(path)
        elif state.content_hash != note.content_hash or (
            text_version is not None and state.text_version != text_version
        ):
            buckets["stale"].append(path)
            # Out of date since its last change on disk, and never before it was embedded.
            stale_since[path] = max(note.mtime, state.embedded_at)
        else:
            buckets["fresh"].append(path)
    keep = set(disk) | set(present)
    buckets["orphaned"] = sorted(p for p in states if p not in keep)
    return Classification(
        fresh=tuple(buckets["fresh"]),
        missing=tuple(buckets["missing"]),
        stale=tuple(buckets["stale"]),
        orphaned=tuple(buckets["orphaned"]),
        model_mismatch=tuple(buckets["model_mismatch"]),
        stale_since=stale_since,
    )


def coverage_by_type(
    files: Iterable[ScannedFile],
    classification: Classification,
    skipped: Iterable[SkippedNote],
    orphan_types: Mapping[str, str],
    *,
    compared: bool = True,
    read: bool = True,
) -> tuple[TypeCoverage, ...]:
    """Per source type: notes on disk, and how many are fresh, missing, stale … skipped."""
    type_of = {f.path: f.source_type for f in files}
    notes = Counter(type_of.values())
    per: dict[str, Counter[str]] = {t: Counter() for t in SOURCE_TYPES}
    for state in ("fresh", "missing", "stale", "model_mismatch"):
        for path in classification.paths(state):
            per.setdefault(type_of[path], Counter())[state] += 1
    for path in classification.orphaned:
        per.setdefault(orphan_types[path], Counter())["orphaned"] += 1
    for s in skipped:
        per.setdefault(type_of[s.path], Counter())["skipped"] += 1
    return tuple(
        TypeCoverage(
            source_type=t,
            notes=notes.get(t, 0),
            fresh=c["fresh"],
            missing=c["missing"],
            stale=c["stale"],
            orphaned=c["orphaned"],
            model_mismatch=c["model_mismatch"],
            skipped=c["skipped"],
            compared=compared,
            read=read,
        )
        for t, c in per.items()
    )


def check_calibration(
    cal: Calibration | None,
    *,
    model_id: str,
    dims: int | None,
    vault_notes: int,
    settings: Settings,
    checked: bool,
    now: float,
) -> CalibrationCheck:
    """Calibration status: missing, outdated (with reasons) or ok."""
    reasons = outdated_reasons(
        cal,
        model_id=model_id,
        # Unknown dims: only the model id can be compared, so take the stored dims.
        dims=dims if dims is not None else (cal.dims if cal else 0),
        vault_notes=vault_notes,
        max_drift=settings.calibration_max_drift,
        max_age_days=settings.calibration_max_age_days,
        now=now,
    )
    status: CalibrationStatus = "missing" if cal is None else "outdated" if reasons else "ok"
    age = now - cal.measured_at if cal is not None else None
    return CalibrationCheck(status, tuple(reasons), checked, cal, age)


def decide(
    classification: Classification,
    calibration: CalibrationCheck,
    options: FreshnessOptions,
    errors: Iterable[str],
) -> tuple[Status, tuple[str, ...]]:
    """The status and its reasons: errors first, then thresholds, then calibration."""
    errors = tuple(errors)
    if errors:
        return "error", errors
    reasons: list[str] = []
    counts = classification.counts()
    out_of_date = sum(counts.values())
    total = len(classification.fresh) + out_of_date
    ratio = out_of_date / total if total else 0.0
    if out_of_date > options.max_stale and ratio > options.max_stale_ratio:
        detail = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts.items() if n)
        reasons.append(
            f"{out_of_date} of {total} notes out of date ({detail}; tolerated: "
            f"{options.max_stale} notes or {options.max_stale_ratio:.1%}): run `vault-ko sync`"
        )
    if options.check_calibration and calibration.status != "ok":
        reasons.extend(f"calibration: {r}" for r in calibration.reasons)
    return ("stale" if reasons else "fresh"), tuple(reasons)
