"""The freshness check: gather the files on disk, the KO-DB registry and the graph's note
states (stores from the composition root), then let ``classify.py`` decide."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
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
from pipeline.ingest import SkippedNote, skip_reason
from pipeline.model import Calibration, Note
from pipeline.vault.parse import EMBED_TEXT_VERSION, read_note
from pipeline.vault.scan import ScannedFile, scan_vault, source_type_for

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

    model_id: str | None = None
    dims: int | None = None
    try:
        model_id, dims = model_identity(settings)
    except VaultKoError as exc:
        errors.append(f"embedding model: {exc}")

    files = scan_vault(settings)

    kodb, kodb_check = _open_kodb(settings, kodb, app, errors)
    registry: Mapping[str, Note] | None = None
    if kodb is not None:
        try:
            registry = kodb.notes()
        except VaultKoError as exc:
            errors.append(f"KO-DB unreachable: {exc}")
            kodb_check = replace(kodb_check, up=False, reason=str(exc))

    graph, graph_check = _open_graph(settings, graph, app, errors)
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
            disk,
            states,
            model=model_id,
            dims=dims,
            text_version=EMBED_TEXT_VERSION,
            present=(s.path for s in skipped),
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
            errors.append(f"graph unreachable: {exc}")
            return None, GraphCheck(False, shown, None, None, None, str(exc))
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
