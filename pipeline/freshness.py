"""Freshness monitoring: does the graph still describe the vault on disk?

One check compares three views of the vault:

* the files on disk (``scan_vault``: paths, source types, mtimes and sizes; no reading),
* the KO-DB registry (the content hash of every note as last ingested),
* the graph's note states (content hash, model and dims of every embedding: one round trip).

A note's current content hash is the registry's when its file still has the registry's mtime
and size (the file is not re-read, so a large unchanged vault costs one ``stat`` per note);
otherwise the file is read and parsed. A note that cannot be read as a note (invalid YAML,
not UTF-8, binary, too big) is reported in ``skipped`` with its reason and never counts as
stale, missing or orphaned.

Each note on disk falls in exactly one state, first match wins:

1. ``missing``: no node in the graph;
2. ``model_mismatch``: embedded with another model id or another number of dims (a model
   switch re-embeds every note, so it says more than ``stale`` would);
3. ``stale``: embedded from other content (hash differs);
4. ``fresh``.

Nodes whose note is gone from disk are ``orphaned``. The report adds the calibration status
(``pipeline.calibrate.outdated_reasons``), graph reachability and latency (``probe``), KO-DB
facts whose source file no longer exists, and the fallback answers served since the previous
check. The configured model's id and dims are derived without loading the model.

Status: ``error`` when the graph or KO-DB cannot be reached (or another error stopped the
check; the reasons say which), else ``stale`` when the out-of-date notes exceed both
``max_stale`` and ``max_stale_ratio`` or the calibration is missing or outdated (unless the
calibration check is off), else ``fresh``. Exit codes 0 / 1 / 2 follow the status.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pipeline.calibrate import outdated_reasons
from pipeline.config import Settings, mask_url
from pipeline.embed import configured_identity as model_identity
from pipeline.errors import EXIT_FAILURE, EXIT_OK, EXIT_UNAVAILABLE, InputError, VaultKoError
from pipeline.fallback_log import fallbacks_since_last_check
from pipeline.ingest import SkippedNote, skip_reason
from pipeline.model import SOURCE_TYPES, Calibration, Note
from pipeline.vault.parse import read_note
from pipeline.vault.scan import ScannedFile, scan_vault, source_type_for

if TYPE_CHECKING:
    from pipeline.graph import GraphStatus, NoteState

log = logging.getLogger(__name__)

Status = Literal["fresh", "stale", "error"]
CalibrationStatus = Literal["ok", "missing", "outdated", "unknown"]

#: The note states a note can be in, in the order the report lists them.
NOTE_STATES: tuple[str, ...] = ("fresh", "missing", "stale", "orphaned", "model_mismatch")
#: The states that make a note out of date (everything but fresh).
OUT_OF_DATE: tuple[str, ...] = ("missing", "stale", "orphaned", "model_mismatch")


# -- what the check needs of the stores (KoDB and GraphClient provide it) -------------------


class Registry(Protocol):
    """The KO-DB calls the check makes."""

    @property
    def dialect(self) -> str: ...

    def notes(self) -> Mapping[str, Note]: ...
    def fact_source_files(self) -> Mapping[str, int]: ...
    def latest_calibration(
        self, embedder: str | None = None, dims: int | None = None
    ) -> Calibration | None: ...


class GraphView(Protocol):
    """The graph calls the check makes."""

    def probe(self) -> GraphStatus: ...
    def note_states(self) -> Mapping[str, NoteState]: ...


# -- options and report ---------------------------------------------------------------------


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

    @property
    def coverage(self) -> float | None:
        """Share of the readable notes on disk that are embedded and current (1.0 if there
        are none; None when the graph could not be compared)."""
        if not self.compared:
            return None
        readable = self.notes - self.skipped
        return self.fresh / readable if readable > 0 else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "notes": self.notes,
            "fresh": self.fresh,
            "missing": self.missing,
            "stale": self.stale,
            "orphaned": self.orphaned,
            "model_mismatch": self.model_mismatch,
            "skipped": self.skipped,
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

    def as_dict(self) -> dict[str, Any]:
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
    reason: str | None
    notes: int | None = None  # Note nodes in the graph (None when not read)

    def as_dict(self) -> dict[str, Any]:
        return {
            "up": self.up,
            "url": self.url,
            "dialect": self.dialect,
            "agent": self.agent,
            "latency_ms": _round(self.latency_ms),
            "reason": self.reason,
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "up": self.up,
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
            graph=GraphCheck(False, None, None, None, None, "not checked"),
            kodb=KodbCheck(up=False, url="", reason="not checked"),
            fallback_answers=0,
            reread=0,
            compared=False,
            options=options or FreshnessOptions(),
            checked_at=time.time() if now is None else now,
            seconds=0.0,
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
        """The JSON document of ``vault-ko freshness --json`` (keys are a contract)."""
        return {
            "status": self.status,
            "reasons": list(self.reasons),
            "vault": self.vault,
            "model": self.model,
            "dims": self.dims,
            "notes_on_disk": self.notes_on_disk,
            "counts": {**self.counts, "fresh": len(self.classification.fresh)},
            "notes": {s: list(self.classification.paths(s)) for s in OUT_OF_DATE},
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "oldest_stale_seconds": _round(self.oldest_stale_seconds),
            "by_type": {t.source_type: t.as_dict() for t in self.by_type},
            "calibration": self.calibration.as_dict(),
            "graph": self.graph.as_dict(),
            "kodb": self.kodb.as_dict(),
            "fallback_answers": self.fallback_answers,
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


# -- the pure parts ---------------------------------------------------------------------------


def classify(
    disk: Mapping[str, DiskNote],
    states: Mapping[str, NoteState],
    *,
    model: str,
    dims: int | None,
    present: Iterable[str] = (),
) -> Classification:
    """Put every note on disk in one state and find the orphans (see the module docstring).

    ``present`` names files that exist but were not classified (skipped bad input): their
    nodes are not orphans. ``dims`` None compares the model id only.
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
        elif state.content_hash != note.content_hash:
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


def current_notes(
    settings: Settings, files: Iterable[ScannedFile], registry: Mapping[str, Note]
) -> tuple[dict[str, DiskNote], list[SkippedNote], int]:
    """(readable notes with their current hash, skipped bad notes, number of files read).

    A file whose mtime and size equal its registry row keeps the registry's hash unread.
    """
    notes: dict[str, DiskNote] = {}
    skipped: list[SkippedNote] = []
    reread = 0
    for f in files:
        known = registry.get(f.path)
        if known is not None and f.untouched_since(known):
            notes[f.path] = DiskNote(f.path, f.source_type, known.content_hash, f.mtime)
            continue
        reread += 1
        try:
            parsed = read_note(settings.vault, f.path, f.source_type, settings.vault_max_note_bytes)
        except InputError as exc:
            skipped.append(SkippedNote(f.path, skip_reason(exc)))
            continue
        notes[f.path] = DiskNote(f.path, f.source_type, parsed.content_hash, f.mtime)
    return notes, skipped, reread


def coverage_by_type(
    files: Iterable[ScannedFile],
    classification: Classification,
    skipped: Iterable[SkippedNote],
    orphan_types: Mapping[str, str],
    *,
    compared: bool = True,
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


def orphan_fact_files(
    settings: Settings, source_files: Mapping[str, int], on_disk: Iterable[str]
) -> tuple[str, ...]:
    """Source files of facts that no longer exist (vault-relative, or absolute as stored)."""
    known = set(on_disk)
    gone = []
    for name in source_files:
        if name in known:
            continue
        path = Path(name)
        if not (path if path.is_absolute() else settings.vault / path).exists():
            gone.append(name)
    return tuple(sorted(gone))


# -- the check --------------------------------------------------------------------------------


def check_freshness(
    settings: Settings,
    options: FreshnessOptions | None = None,
    *,
    kodb: Registry | None = None,
    graph: GraphView | None = None,
    now: float | None = None,
) -> FreshnessReport:
    """Run one freshness check. Stores not given are opened (and closed) here.

    Never raises for an unreachable store or a bad setting: the report then has status
    "error" and says why in ``reasons``.
    """
    options = options or FreshnessOptions.from_settings(settings)
    started = time.perf_counter()
    now = time.time() if now is None else now
    errors: list[str] = []
    warnings: list[str] = []

    model_id: str | None = None
    dims: int | None = None
    try:
        model_id, dims = model_identity(settings)
    except VaultKoError as exc:
        errors.append(f"embedding model: {exc}")

    files = scan_vault(settings)

    with ExitStack() as stack:
        kodb, kodb_check = _open_kodb(settings, kodb, stack, errors)
        registry: Mapping[str, Note] | None = None
        if kodb is not None:
            try:
                registry = kodb.notes()
            except VaultKoError as exc:
                errors.append(f"KO-DB unreachable: {exc}")
                kodb_check = replace(kodb_check, up=False, reason=str(exc))

        graph, graph_check = _open_graph(settings, graph, stack, errors)
        states: Mapping[str, NoteState] | None = None
        if graph is not None and graph_check.up:
            try:
                states = graph.note_states()
                graph_check = replace(graph_check, notes=len(states))
            except VaultKoError as exc:
                errors.append(f"graph failed while reading note states: {exc}")

        if dims is None and states and model_id is not None:
            # An unknown model's width: what the graph stores for that model, if anything.
            widths = Counter(s.dims for s in states.values() if s.model == model_id)
            dims = widths.most_common(1)[0][0] if widths else None

        compared = states is not None and registry is not None and model_id is not None
        disk: dict[str, DiskNote] = {}
        skipped: list[SkippedNote] = []
        reread = 0
        if registry is not None and states is not None and model_id is not None:
            disk, skipped, reread = current_notes(settings, files, registry)
            classification = classify(
                disk, states, model=model_id, dims=dims, present=(s.path for s in skipped)
            )
        else:
            classification = Classification((), (), (), (), ())

        calibration = CalibrationCheck(
            "unknown", ("KO-DB or model unavailable",), options.check_calibration
        )
        if kodb is not None and kodb_check.up and model_id is not None:
            try:
                kodb_check = _kodb_facts(settings, kodb, kodb_check, files, registry or {})
                calibration = check_calibration(
                    _latest_calibration(kodb, model_id, dims),
                    model_id=model_id,
                    dims=dims,
                    vault_notes=len(files),
                    settings=settings,
                    checked=options.check_calibration,
                    now=now,
                )
            except VaultKoError as exc:
                errors.append(f"KO-DB failed: {exc}")
                kodb_check = replace(kodb_check, up=False, reason=str(exc))

    try:
        fallbacks = fallbacks_since_last_check(
            settings.state_dir, advance=options.advance_fallback_mark
        )
    except OSError as exc:  # a read-only state dir must not hide the rest of the report
        fallbacks = 0
        warnings.append(f"fallback log unreadable: {exc}")

    registry_types = {p: n.source_type for p, n in (registry or {}).items()}
    orphan_types = {
        p: registry_types.get(p) or source_type_for(p, settings) for p in classification.orphaned
    }
    since = list(classification.stale_since.values())
    status, reasons = decide(classification, calibration, options, errors)
    return FreshnessReport(
        status=status,
        reasons=reasons,
        vault=str(settings.vault),
        model=model_id,
        dims=dims,
        notes_on_disk=len(files),
        classification=classification,
        skipped=tuple(skipped),
        oldest_stale_seconds=max(0.0, now - min(since)) if since else None,
        by_type=coverage_by_type(files, classification, skipped, orphan_types, compared=compared),
        calibration=calibration,
        graph=graph_check,
        kodb=kodb_check,
        fallback_answers=fallbacks,
        reread=reread,
        compared=compared,
        options=options,
        checked_at=now,
        seconds=time.perf_counter() - started,
        warnings=tuple(warnings),
    )


def _open_kodb(
    settings: Settings, kodb: Registry | None, stack: ExitStack, errors: list[str]
) -> tuple[Registry | None, KodbCheck]:
    url = mask_url(settings.effective_kodb_url)
    if kodb is None:
        from pipeline.kodb import KoDB

        try:
            opened = KoDB.open(settings.effective_kodb_url)
        except VaultKoError as exc:
            errors.append(f"KO-DB unreachable: {exc}")
            return None, KodbCheck(up=False, url=url, reason=str(exc))
        stack.callback(opened.close)
        kodb = opened
    return kodb, KodbCheck(up=True, url=url, dialect=kodb.dialect)


def _open_graph(
    settings: Settings, graph: GraphView | None, stack: ExitStack, errors: list[str]
) -> tuple[GraphView | None, GraphCheck]:
    shown = mask_url(settings.graph_url) if settings.graph_url else None
    if graph is None:
        try:
            from pipeline.graph import open_graph

            client = open_graph(settings)
        except VaultKoError as exc:
            errors.append(f"graph unreachable: {exc}")
            return None, GraphCheck(False, shown, None, None, None, str(exc))
        stack.callback(client.close)
        graph = client
    status = graph.probe()  # one attempt, never raises
    check = GraphCheck(
        up=status.up,
        url=mask_url(status.url) if status.url else shown,
        dialect=status.dialect,
        agent=status.agent,
        latency_ms=status.latency_ms,
        reason=status.reason,
    )
    if not status.up:
        reason = status.reason or "no answer"
        where = "" if check.url and check.url in reason else f" at {check.url}"
        errors.append(f"graph unreachable{where}: {reason}")
    return graph, check


def _kodb_facts(
    settings: Settings,
    kodb: Registry,
    check: KodbCheck,
    files: Iterable[ScannedFile],
    registry: Mapping[str, Note],
) -> KodbCheck:
    source_files = kodb.fact_source_files()
    gone = orphan_fact_files(settings, source_files, (f.path for f in files))
    return replace(
        check,
        registry_notes=len(registry),
        facts=sum(source_files.values()),
        orphan_facts=sum(source_files[f] for f in gone),
        orphan_fact_files=gone,
    )


def _latest_calibration(kodb: Registry, model_id: str, dims: int | None) -> Calibration | None:
    # The current model's own calibration first; else the latest of any model, which
    # outdated_reasons then reports as measured with another embedder.
    return kodb.latest_calibration(model_id, dims) or kodb.latest_calibration()


# -- Prometheus text exposition ---------------------------------------------------------------

PROM_PREFIX = "vault_ko_"


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _prom_value(value: float) -> str:
    # bool and int first: both are floats to the type checker but print without ".0".
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class _Exposition:
    """Gauges in the text exposition format, each family with its HELP and TYPE lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def gauge(
        self, name: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]
    ) -> None:
        full = PROM_PREFIX + name
        rows = list(samples)
        if not rows:
            return
        self.lines.append(f"# HELP {full} {help_text.replace(chr(92), chr(92) * 2)}")
        self.lines.append(f"# TYPE {full} gauge")
        for labels, value in rows:
            body = ",".join(f'{k}="{_escape_label(str(v))}"' for k, v in labels.items())
            series = f"{full}{{{body}}}" if body else full
            self.lines.append(f"{series} {_prom_value(value)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def to_prometheus(report: FreshnessReport) -> str:
    """The report as Prometheus text (for a node-exporter textfile collector).

    Unknown values (graph latency when it is down, ages with nothing stale) are left out
    rather than written as 0, which would read as "fresh" or "instant".
    """
    p = _Exposition()
    p.gauge(
        "freshness_status",
        "Outcome of the last freshness check (1 for the current status).",
        (({"status": s}, int(report.status == s)) for s in ("fresh", "stale", "error")),
    )
    p.gauge(
        "freshness_check_timestamp_seconds",
        "Unix time of the last freshness check.",
        [({}, report.checked_at)],
    )
    p.gauge(
        "freshness_check_duration_seconds",
        "Seconds the last freshness check took.",
        [({}, report.seconds)],
    )
    p.gauge("vault_notes", "Notes on disk in the vault.", [({}, report.notes_on_disk)])
    counts = report.classification.counts(NOTE_STATES)
    counts["skipped"] = len(report.skipped)
    p.gauge(
        "notes",
        "Notes by embedding state (skipped: bad input, not counted as stale).",
        (({"state": s}, n) for s, n in counts.items()),
    )
    by_type_rows: list[tuple[Mapping[str, str], float]] = []
    for t in report.by_type:
        values = t.as_dict()
        for state in (*NOTE_STATES, "skipped"):
            by_type_rows.append(({"type": t.source_type, "state": state}, values[state]))
    p.gauge("notes_by_type", "Notes by source type and embedding state.", by_type_rows)
    p.gauge(
        "coverage_ratio",
        "Share of a source type's readable notes that are embedded and current.",
        (({"type": t.source_type}, t.coverage) for t in report.by_type if t.coverage is not None),
    )
    if report.oldest_stale_seconds is not None:
        p.gauge(
            "oldest_stale_seconds",
            "Age of the oldest unembedded change (missing or stale note).",
            [({}, report.oldest_stale_seconds)],
        )
    cal = report.calibration
    p.gauge(
        "calibration_ok",
        "1 when the stored noise-floor calibration is current.",
        [({}, int(cal.status == "ok"))],
    )
    p.gauge(
        "calibration_status",
        "Calibration status (1 for the current one).",
        (({"status": s}, int(cal.status == s)) for s in ("ok", "missing", "outdated", "unknown")),
    )
    if cal.age_seconds is not None:
        p.gauge(
            "calibration_age_seconds",
            "Age of the stored calibration.",
            [({}, cal.age_seconds)],
        )
    g = report.graph
    p.gauge("graph_up", "1 when the graph answered the probe.", [({}, int(g.up))])
    if g.latency_ms is not None:
        p.gauge(
            "graph_latency_seconds",
            "Round-trip time of the graph probe.",
            [({}, g.latency_ms / 1000.0)],
        )
    p.gauge(
        "graph_info",
        "The graph server's dialect and agent (always 1).",
        [({"dialect": g.dialect or "", "agent": g.agent or ""}, 1)],
    )
    if g.notes is not None:
        p.gauge("graph_notes", "Note nodes in the graph.", [({}, g.notes)])
    k = report.kodb
    p.gauge("kodb_up", "1 when KO-DB answered.", [({}, int(k.up))])
    p.gauge("kodb_facts", "Facts in KO-DB.", [({}, k.facts)])
    p.gauge(
        "kodb_orphan_facts",
        "KO-DB facts whose source file no longer exists.",
        [({}, k.orphan_facts)],
    )
    p.gauge(
        "fallback_answers",
        "Degraded (fallback) answers served since the previous check.",
        [({}, report.fallback_answers)],
    )
    return p.text()
