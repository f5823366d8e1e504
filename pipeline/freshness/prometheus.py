"""The freshness report as Prometheus metrics, through prometheus_client: text for stdout
(``to_prometheus``) and a node-exporter textfile written atomically by the library's own
``write_to_textfile`` (temp file and rename), so the collector never reads half a file.

Unknown values (note counts and graph latency when the graph is down, ages with nothing
stale) have no sample rather than a 0, which would read as "fresh" or "instant"; their
metric is still declared (HELP and TYPE), so a dashboard sees it exists and has no value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pipeline.freshness.report import NOTE_STATES, FreshnessReport

PROM_PREFIX = "vault_ko_"

Samples = Iterable[tuple[Mapping[str, str], float]]


class _ReportCollector:
    """A prometheus_client collector of one report's gauges (collected once)."""

    def __init__(self, report: FreshnessReport) -> None:
        self.report = report

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        for name, help_text, samples in _gauges(self.report):
            rows = list(samples)  # may be empty: the metric is declared, its value unknown
            labels = sorted({k for labels, _ in rows for k in labels})
            family = GaugeMetricFamily(PROM_PREFIX + name, help_text, labels=labels)
            for row_labels, value in rows:
                family.add_metric([str(row_labels.get(k, "")) for k in labels], float(value))
            yield family


def _registry(report: FreshnessReport) -> Any:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(_ReportCollector(report))  # type: ignore[arg-type]
    return registry


def to_prometheus(report: FreshnessReport) -> str:
    """The report as Prometheus text (the exposition format)."""
    from prometheus_client import generate_latest

    return generate_latest(_registry(report)).decode("utf-8")


def write_textfile(report: FreshnessReport, path: Path) -> None:
    """Write the report for a node-exporter textfile collector, atomically."""
    from prometheus_client import write_to_textfile

    write_to_textfile(str(path), _registry(report))


def _gauges(report: FreshnessReport) -> Iterator[tuple[str, str, Samples]]:
    """Every gauge of the report, as (name without prefix, help, samples), in output order."""
    yield from _check_gauges(report)
    yield from _note_gauges(report)
    yield from _calibration_gauges(report)
    yield from _graph_gauges(report)
    yield from _kodb_gauges(report)
    yield (
        "fallback_answers",
        "Degraded (fallback) answers served since the previous check.",
        [({}, report.fallback_answers)],
    )


def _check_gauges(report: FreshnessReport) -> Iterator[tuple[str, str, Samples]]:
    """The check itself: its status, time and duration."""
    yield (
        "freshness_status",
        "Outcome of the last freshness check (1 for the current status).",
        (({"status": s}, int(report.status == s)) for s in ("fresh", "stale", "error")),
    )
    yield (
        "freshness_check_timestamp_seconds",
        "Unix time of the last freshness check.",
        [({}, report.checked_at)],
    )
    yield (
        "freshness_check_duration_seconds",
        "Seconds the last freshness check took.",
        [({}, report.seconds)],
    )


def _note_gauges(report: FreshnessReport) -> Iterator[tuple[str, str, Samples]]:
    """The vault's notes: on disk, by embedding state and source type, coverage, age."""
    # A check that stopped before the stores (bad settings) did not count the notes either.
    on_disk = report.notes_on_disk if report.kodb.checked else None
    yield "vault_notes", "Notes on disk in the vault.", _known(on_disk)
    counts: dict[str, int] = {}
    if report.compared:  # else the graph was not read: no count is known
        counts = report.classification.counts(NOTE_STATES)
    if report.notes_read:
        counts["skipped"] = len(report.skipped)
    yield (
        "notes",
        "Notes by embedding state (skipped: bad input, not counted as stale).",
        (({"state": s}, n) for s, n in counts.items()),
    )
    by_type: list[tuple[Mapping[str, str], float]] = []
    for t in report.by_type:
        values = t.to_dict()  # None for what the check could not know
        for state in (*NOTE_STATES, "skipped"):
            if values[state] is not None:
                by_type.append(({"type": t.source_type, "state": state}, values[state]))
    yield "notes_by_type", "Notes by source type and embedding state.", by_type
    yield (
        "coverage_ratio",
        "Share of a source type's readable notes that are embedded and current.",
        (({"type": t.source_type}, t.coverage) for t in report.by_type if t.coverage is not None),
    )
    yield (
        "oldest_stale_seconds",
        "Age of the oldest unembedded change (missing or stale note).",
        _known(report.oldest_stale_seconds),
    )


def _calibration_gauges(report: FreshnessReport) -> Iterator[tuple[str, str, Samples]]:
    """The stored noise-floor calibration: ok, status, age."""
    cal = report.calibration
    yield (
        "calibration_ok",
        "1 when the stored noise-floor calibration is current.",
        _known(None if cal.status == "unknown" else int(cal.status == "ok")),
    )
    yield (
        "calibration_status",
        "Calibration status (1 for the current one).",
        (({"status": s}, int(cal.status == s)) for s in ("ok", "missing", "outdated", "unknown")),
    )
    yield "calibration_age_seconds", "Age of the stored calibration.", _known(cal.age_seconds)


def _graph_gauges(report: FreshnessReport) -> Iterator[tuple[str, str, Samples]]:
    """The graph: up, probe latency, server info, note nodes."""
    g = report.graph
    up = int(g.up) if g.checked else None
    yield "graph_up", "1 when the graph answered the probe.", _known(up)
    yield (
        "graph_latency_seconds",
        "Round-trip time of the graph probe.",
        _known(None if g.latency_ms is None else g.latency_ms / 1000.0),
    )
    yield (
        "graph_info",
        "The graph server's dialect and agent (always 1).",
        [({"dialect": g.dialect or "", "agent": g.agent or ""}, 1)],
    )
    yield "graph_notes", "Note nodes in the graph.", _known(g.notes)


def _kodb_gauges(report: FreshnessReport) -> Iterator[tuple[str, str, Samples]]:
    """KO-DB: up, facts, orphan facts."""
    k = report.kodb
    yield "kodb_up", "1 when KO-DB answered.", _known(int(k.up) if k.checked else None)
    yield "kodb_facts", "Facts in KO-DB.", _known(k.facts if k.checked else None)
    yield (
        "kodb_orphan_facts",
        "KO-DB facts whose source file no longer exists.",
        _known(k.orphan_facts if k.checked else None),
    )


def _known(value: float | None) -> list[tuple[Mapping[str, str], float]]:
    """One unlabelled sample, or none when the value is unknown."""
    return [] if value is None else [({}, value)]
