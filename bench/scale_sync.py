"""Writing a large vault: ingest notes/s, facts import rows/s and peak memory, a no-op sync
and an incremental sync after editing 1 % of the notes — at 20,000 notes / 1,000,000 facts.

The World builds it (see harness.py): ``ingest_vault`` of make_corpus.py's vault into SQLite
and into a scratch PostgreSQL database (timed), ``vault-ko facts import`` of the facts file
in a child process for each (wall time, and the child's own peak RSS from ``wait4``), the
graph loaded from the embedding cache. Then, measured here:

* no-op sync: ``sync_vault`` (ingest + embed + calibration check) with nothing changed;
* the unsynced-edits check a cold answer makes (``pipeline/vault/edits.py``), synced and
  after the edits below;
* incremental: 1 % of the notes edited (a sentence appended), then ``sync_vault`` with the
  real model; compared with a full embed of the vault projected from the embed part's
  measured notes/s when it ran in the same run (bench/run.py), else with the no-op sync.

It edits the World's vault: bench/run.py runs it last. Run alone:
``.venv/bin/python bench/scale_sync.py [--quick]``; the last line is ``RESULT …``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import TYPE_CHECKING

from harness import Report, Row, World, add_common_args, log, world_or

from pipeline.model import UnsyncedEdits

if TYPE_CHECKING:
    from pipeline.app import App

#: The issue's targets: facts import peak memory under 300 MB for 1M rows; ingest ≥ 300/s.
IMPORT_PEAK_MB = 300
INGEST_PER_S = 300


def write_rows(report: Report, w: World) -> None:
    m = w.measures
    notes = int(m["ingest_notes"])
    for key, label in (("sqlite", "SQLite"), ("pg", "PostgreSQL")):
        if f"ingest_{key}_s" not in m:
            continue
        per_s = notes / m[f"ingest_{key}_s"]
        report.add(
            Row(
                f"ingest of {notes:,} notes, {label}: notes/s",
                f"{per_s:.0f} notes/s ({m[f'ingest_{key}_s']:.1f} s)",
                "",
                "",
                f"target ≥ {INGEST_PER_S}/s: {'met' if per_s >= INGEST_PER_S else 'missed'}",
            ),
            **{f"ingest_{key}_notes_per_s": per_s},
        )
    rows = w.size["facts"]
    for key, label in (("sqlite", "SQLite"), ("pg", "PostgreSQL")):
        if f"import_{key}_s" not in m:
            continue
        per_s = rows / m[f"import_{key}_s"]
        peak = m[f"import_{key}_peak_mb"]
        report.add(
            Row(
                f"`vault-ko facts import` of {rows:,} rows, {label}: rows/s, peak memory",
                f"{per_s:,.0f} rows/s ({m[f'import_{key}_s']:.1f} s), peak RSS {peak:.0f} MB",
                f"facts file {w.corpus.facts_file().stat().st_size / 2**20:.0f} MiB",
                "",
                f"target peak < {IMPORT_PEAK_MB} MB: "
                f"{'met' if peak < IMPORT_PEAK_MB else 'missed'}",
            ),
            **{f"import_{key}_rows_per_s": per_s, f"import_{key}_peak_mb": peak},
        )


def run(report: Report, args: argparse.Namespace, world: World | None = None) -> None:
    from make_corpus import CachedEmbedder

    with world_or(world, args) as w:
        if world is None:  # bench/run.py writes the World's rows itself, first
            write_rows(report, w)
        app = w.app
        cached = CachedEmbedder(w.corpus, w.embedder)
        notes = len(app.kodb.notes())
        t0 = time.perf_counter()
        noop = w.sync(cached)
        noop_s = time.perf_counter() - t0
        if noop.embedded or noop.deleted:
            raise SystemExit(f"no-op sync changed the graph: {noop}")
        graph = "" if w.graph_paths is None else f"; graph: {len(w.graph_paths):,} of them"
        report.add(
            Row(
                f"no-op `vault-ko sync` at {notes:,} notes{graph} (ingest + embed + "
                "calibration check)",
                f"{noop_s:.2f} s",
                f"first ingest {w.measures['ingest_sqlite_s']:.1f} s",
                f"{noop_s / w.measures['ingest_sqlite_s']:.3f} of it",
            ),
            noop_sync_s=noop_s,
        )

        synced_ms, none = unsynced_check(app)
        if none.total:
            raise SystemExit(f"a synced vault has unsynced edits: {none}")
        embedded = sorted(w.graph_paths) if w.graph_paths is not None else sorted(app.kodb.notes())
        changed = max(1, len(embedded) // 100)
        paths = embedded[:: max(1, len(embedded) // changed)][:changed]
        for path in paths:
            with (w.vault / path).open("a", encoding="utf-8") as f:
                f.write("\nEdited for the incremental sync benchmark.\n")
        edited_ms, seen = unsynced_check(app)
        if seen.changed != changed:
            raise SystemExit(f"the unsynced check counted {seen}, not {changed} changed")
        report.add(
            Row(
                f"a cold answer's unsynced-edits check at {notes:,} notes (registry stamps "
                "+ scan), median of 5",
                f"{synced_ms:.0f} ms synced; {edited_ms:.0f} ms with {changed} edited",
                "",
                "",
                "",
            ),
            unsynced_check_ms=synced_ms,
            unsynced_check_edited_ms=edited_ms,
        )
        t0 = time.perf_counter()
        inc = w.sync(w.embedder)
        inc_s = time.perf_counter() - t0
        if inc.embedded != changed:
            raise SystemExit(f"incremental sync embedded {inc.embedded}, not {changed}")
        notes = len(embedded)
        speed = report.results.get("embed_notes_per_s")
        if speed:
            full = notes / float(speed)
            against = (
                f"full embed of {notes:,} notes projected at {speed:.1f} notes/s: {full:.0f} s"
            )
            share = inc_s / full
            ratio = f"{share:.3f} of full"
            check = f"target ≤ 0.05: {'met' if share <= 0.05 else 'missed'}"
            report.results["incremental_20k_vs_full_projected"] = share
        else:
            against, ratio, check = f"no-op sync {noop_s:.2f} s", f"{inc_s / noop_s:.1f}×", ""
        report.add(
            Row(
                f"incremental `vault-ko sync` after editing 1 % ({changed} of {notes:,} "
                "embedded notes)",
                f"{inc_s:.2f} s (embed step {inc.seconds:.2f} s)",
                against,
                ratio,
                check,
            ),
            incremental_sync_s=inc_s,
        )
        log("scale sync: done")


def unsynced_check(app: App) -> tuple[float, UnsyncedEdits]:
    """The median time of 5 unsynced-edits checks as a cold answer runs it, and its count."""
    from pipeline.vault.edits import unsynced_edits

    times, found = [], UnsyncedEdits()
    for _ in range(5):
        t0 = time.perf_counter()
        found = unsynced_edits(app.settings, app.kodb.note_stamps())
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    args = parser.parse_args()
    report = Report()
    run(report, args)
    report.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
