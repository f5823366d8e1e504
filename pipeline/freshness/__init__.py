"""Freshness monitoring: does the graph still describe the vault on disk?

The package is split by job: ``report.py`` the records (options, classification, the
report and its JSON), ``classify.py`` the pure decisions (a note's state, coverage, the
calibration status, the verdict), ``check.py`` the check that gathers the inputs from disk,
KO-DB and the graph (stores from the composition root), ``prometheus.py`` the Prometheus
text and textfile (prometheus_client).


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

from pipeline.freshness.check import GraphView, Registry, check_freshness, current_notes
from pipeline.freshness.classify import (
    check_calibration,
    classify,
    coverage_by_type,
    decide,
)
from pipeline.freshness.prometheus import to_prometheus, write_textfile
from pipeline.freshness.report import (
    NOTE_STATES,
    OUT_OF_DATE,
    CalibrationCheck,
    CalibrationStatus,
    Classification,
    DiskNote,
    FreshnessOptions,
    FreshnessReport,
    GraphCheck,
    KodbCheck,
    Status,
    TypeCoverage,
)

__all__ = [
    "NOTE_STATES",
    "OUT_OF_DATE",
    "CalibrationCheck",
    "CalibrationStatus",
    "Classification",
    "DiskNote",
    "FreshnessOptions",
    "FreshnessReport",
    "GraphCheck",
    "GraphView",
    "KodbCheck",
    "Registry",
    "Status",
    "TypeCoverage",
    "check_calibration",
    "check_freshness",
    "classify",
    "coverage_by_type",
    "current_notes",
    "decide",
    "to_prometheus",
    "write_textfile",
]
