"""The freshness check: gather the files on disk, the KO-DB registry and the graph's note
states (stores from the composition root), then let ``classify.py`` decide."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pipeline.config import Settings, mask_url
from pipeline.embed import configured_identity as model_identity
from pipeline.errors import InputError, VaultKoError
from pipeline.fallback_log import fallbacks_since_last_check
from pipeline.freshness.classify import (
    check_calibration,
    classify,
    coverage_by_type,
    decide,
)
from pipeline.freshness.report import (
    CalibrationCheck,
    Classification,
    DiskNote,
    FreshnessOptions,
    FreshnessReport,
    GraphCheck,
    KodbCheck,
)
from pipeline.graph.reason import graph_reason
from pipeline.ingest import SkippedNote, skip_reason
from pipeline.model import Calibration, Note
from pipeline.vault.parse import read_note
from pipeline.vault.passages import text_version
from pipeline.vault.scan import ScannedFile, scan_vault, source_type_for, under
from pipeline.watch import watcher_status

if TYPE_CHECKING:
    from pipeline.app import App
    from pipeline.graph import GraphStatus, NoteState

log = logging.getLogger(__name__)

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
        try:
            (path if path.is_absolute() else settings.vault / path).stat()
        except (FileNotFoundError, NotADirectoryError):
            gone.append(name)
        except OSError:
            continue  # there, or not known to be gone (an unreadable folder)
    return tuple(sorted(gone))


# -- the check --------------------------------------------------------------------------------


def check_freshness(
    settings: Settings,
    options: FreshnessOptions | None = None,
    *,
    kodb: Registry | None = None,
    graph: GraphView | None = None,
    app: App | None = None,
    now: float | None = None,
) -> FreshnessReport:
    """Run one freshness check over the stores it is handed: ``kodb`` and ``graph``, or
    those of ``app`` (the caller's composition root, which the caller closes).

    Never raises for an unreachable store or a bad setting: the report then has status
    "error" and says why in ``reasons``.
    """
    if app is None and (kodb is None or graph is None):
        raise TypeError("check_freshness needs an App, or both kodb and graph")
    options = options or FreshnessOptions.from_settings(settings)
    started = time.perf_counter()
    now = time.time() if now is None else now
    errors: list[str] = []
    warnings: list[str] = []

    model_id, dims = _model(settings, errors)
    unlisted: list[tuple[str, str]] = []
    files = scan_vault(settings, unreadable=unlisted)
    # Its notes would count as missing: what is in a folder we cannot list is not known.
    errors += [f"cannot list the vault folder {folder}: {why}" for folder, why in unlisted]
    kodb, kodb_check, registry = _read_registry(settings, kodb, app, errors)
    graph_check, states = _read_graph(settings, graph, app, errors)
    if dims is None and states and model_id is not None:
        dims = _stored_width(states, model_id)
    folders = [folder for folder, _ in unlisted]
    comparison = _compare(settings, files, registry, states, model_id, dims, folders)
    kodb_check, calibration = _check_kodb(
        settings, kodb, kodb_check, files, registry, model_id, dims, options, now, errors
    )
    gathered = _Gathered(
        model_id=model_id,
        dims=dims,
        files=files,
        registry=registry,
        comparison=comparison,
        calibration=calibration,
        graph=graph_check,
        kodb=kodb_check,
        fallbacks=_fallbacks(settings, options, warnings),
    )
    return _report(settings, options, gathered, errors, warnings, now=now, started=started)


def _model(settings: Settings, errors: list[str]) -> tuple[str | None, int | None]:
    """The configured embedding model's (id, dims); (None, None) and an error if unknown."""
    try:
        return model_identity(settings)
    except VaultKoError as exc:
        errors.append(f"embedding model: {exc}")
        return None, None


def _read_registry(
    settings: Settings, kodb: Registry | None, app: App | None, errors: list[str]
) -> tuple[Registry | None, KodbCheck, Mapping[str, Note] | None]:
    """Open KO-DB and read its registry: (the store, its check, the registry or None)."""
    kodb, check = _open_kodb(settings, kodb, app, errors)
    registry: Mapping[str, Note] | None = None
    if kodb is not None:
        try:
            registry = kodb.notes()
        except VaultKoError as exc:
            errors.append(f"KO-DB unreachable: {exc}")
            check = replace(check, up=False, reason=str(exc))
    return kodb, check, registry


def _read_graph(
    settings: Settings, graph: GraphView | None, app: App | None, errors: list[str]
) -> tuple[GraphCheck, Mapping[str, NoteState] | None]:
    """Open and probe the graph and read its note states: (its check, the states or None)."""
    graph, check = _open_graph(settings, graph, app, errors)
    states: Mapping[str, NoteState] | None = None
    if graph is not None and check.up:
        try:
            states = graph.note_states()
            check = replace(check, notes=len(states))
        except VaultKoError as exc:
            why = graph_reason(str(exc), check.url)
            errors.append(f"the graph failed while reading note states: {why}")
            check = replace(check, detail=_detail(str(exc), why))
    return check, states


def _stored_width(states: Mapping[str, NoteState], model_id: str) -> int | None:
    """An unknown model's width: what the graph stores for that model, if anything."""
    widths = Counter(s.dims for s in states.values() if s.model == model_id)
    return widths.most_common(1)[0][0] if widths else None


@dataclass(frozen=True)
class _Comparison:
    """The notes on disk against the graph (all empty when ``compared`` is False)."""

    compared: bool  # the registry, the graph's states and the model were all known
    classification: Classification
    skipped: list[SkippedNote]
    reread: int
    read: bool  # the notes on disk were read against the registry: skipped is known


def _compare(
    settings: Settings,
    files: Iterable[ScannedFile],
    registry: Mapping[str, Note] | None,
    states: Mapping[str, NoteState] | None,
    model_id: str | None,
    dims: int | None,
    unlisted: Sequence[str] = (),
) -> _Comparison:
    """Classify the notes on disk against the graph's states, when all three are known.

    With the registry alone (the graph down) the notes are still read, so the bad-input
    ones are known and listed while the counts that need the graph stay unknown. A note in
    a folder that could not be listed (``unlisted``) is not called orphaned."""
    nothing = Classification((), (), (), (), ())
    if registry is None:
        return _Comparison(False, nothing, [], 0, read=False)
    disk, skipped, reread = current_notes(settings, files, registry)
    if states is None or model_id is None:
        return _Comparison(False, nothing, skipped, reread, read=True)
    classification = classify(
        disk,
        states,
        model=model_id,
        dims=dims,
        text_version=text_version(settings.embed_long_notes),  # the sync's own rules
        present=[
            *(s.path for s in skipped),
            *(p for p in states if under(p, unlisted)),
        ],
    )
    return _Comparison(True, classification, skipped, reread, read=True)


def _check_kodb(
    settings: Settings,
    kodb: Registry | None,
    check: KodbCheck,
    files: list[ScannedFile],
    registry: Mapping[str, Note] | None,
    model_id: str | None,
    dims: int | None,
    options: FreshnessOptions,
    now: float,
    errors: list[str],
) -> tuple[KodbCheck, CalibrationCheck]:
    """KO-DB's facts and the model's calibration, when KO-DB is up and the model known."""
    calibration = CalibrationCheck(
        "unknown", ("KO-DB or model unavailable",), options.check_calibration
    )
    if kodb is not None and check.up and model_id is not None:
        try:
            check = _kodb_facts(settings, kodb, check, files, registry or {})
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
            check = replace(check, up=False, reason=str(exc))
    return check, calibration


def _fallbacks(settings: Settings, options: FreshnessOptions, warnings: list[str]) -> int:
    """Fallback answers since the last check (0, with a warning, when the log is unreadable)."""
    try:
        return fallbacks_since_last_check(settings.state_dir, advance=options.advance_fallback_mark)
    except OSError as exc:  # a read-only state dir must not hide the rest of the report
        warnings.append(f"fallback log unreadable: {exc}")
        return 0


@dataclass(frozen=True)
class _Gathered:
    """What the check read from the model, the vault and the stores."""

    model_id: str | None
    dims: int | None
    files: list[ScannedFile]
    registry: Mapping[str, Note] | None
    comparison: _Comparison
    calibration: CalibrationCheck
    graph: GraphCheck
    kodb: KodbCheck
    fallbacks: int


def _report(
    settings: Settings,
    options: FreshnessOptions,
    got: _Gathered,
    errors: list[str],
    warnings: list[str],
    *,
    now: float,
    started: float,
) -> FreshnessReport:
    """Decide the status and assemble the report."""
    classification = got.comparison.classification
    skipped = got.comparison.skipped
    registry_types = {p: n.source_type for p, n in (got.registry or {}).items()}
    orphan_types = {
        p: registry_types.get(p) or source_type_for(p, settings) for p in classification.orphaned
    }
    since = list(classification.stale_since.values())
    status, reasons = decide(classification, got.calibration, options, errors)
    compared = got.comparison.compared
    return FreshnessReport(
        status=status,
        reasons=reasons,
        vault=str(settings.vault),
        model=got.model_id,
        dims=got.dims,
        notes_on_disk=len(got.files),
        classification=classification,
        skipped=tuple(skipped),
        oldest_stale_seconds=max(0.0, now - min(since)) if since else None,
        by_type=coverage_by_type(
            got.files,
            classification,
            skipped,
            orphan_types,
            compared=compared,
            read=got.comparison.read,
        ),
        calibration=got.calibration,
        graph=got.graph,
        kodb=got.kodb,
        fallback_answers=got.fallbacks,
        watcher=watcher_status(settings.state_dir),
        reread=got.comparison.reread,
        compared=compared,
        options=options,
        checked_at=now,
        seconds=time.perf_counter() - started,
        warnings=tuple(warnings),
        # The errors say what could not be read: the first one is why nothing was compared.
        unknown_reason=None if compared else (errors[0] if errors else "not compared"),
        notes_read=got.comparison.read,
    )


def _open_kodb(
    settings: Settings, kodb: Registry | None, app: App | None, errors: list[str]
) -> tuple[Registry | None, KodbCheck]:
    url = mask_url(settings.effective_kodb_url)
    if kodb is None:
        assert app is not None
        try:
            kodb = app.kodb
        except VaultKoError as exc:
            errors.append(f"KO-DB unreachable: {exc}")
            return None, KodbCheck(up=False, url=url, reason=str(exc))
    return kodb, KodbCheck(up=True, url=url, dialect=kodb.dialect)


def _open_graph(
    settings: Settings, graph: GraphView | None, app: App | None, errors: list[str]
) -> tuple[GraphView | None, GraphCheck]:
    shown = mask_url(settings.graph_url) if settings.graph_url else None
    if graph is None:
        assert app is not None
        try:
            graph = app.graph
        except VaultKoError as exc:
            why = graph_reason(str(exc), shown)
            errors.append(why)
            return None, GraphCheck(
                False, shown, None, None, None, why, detail=_detail(str(exc), why)
            )
    status = graph.probe()  # one attempt, never raises
    url = mask_url(status.url) if status.url else shown
    # The report says why in words, once; the driver's own text is kept as the detail.
    why = None if status.up else graph_reason(status.reason or "", url)
    check = GraphCheck(
        up=status.up,
        url=url,
        dialect=status.dialect,
        agent=status.agent,
        latency_ms=status.latency_ms,
        reason=why,
        detail=_detail(status.reason, why),
    )
    if why is not None:
        errors.append(why)
    return graph, check


def _detail(raw: str | None, why: str | None) -> str | None:
    """The driver's own text, when it says more than the worded reason."""
    return raw if raw and raw != why else None


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
