"""What one incremental run costs on a synced vault: what `vault-ko watch` pays per burst.

    python scripts/sync_runs.py VAULT [--edits 3] [--profile] [--remember]

On a vault already synced with its graph up (``vault-ko --vault VAULT graph up`` and
``sync``), in this process with the model loaded: a no-op ``sync_vault``, then ``--edits``
runs after a line is appended to one note each time (it edits that note). With
``--profile``, a cProfile of the last run by own time; with ``--remember``, the graph
client keeps the note states between runs, as a watcher's does. Ends with ``RESULT`` lines.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from pathlib import Path

from pipeline.app import App
from pipeline.config import load_settings
from pipeline.sync import sync_vault


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault")
    parser.add_argument("--edits", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--remember", action="store_true")
    args = parser.parse_args()
    settings = load_settings(args.vault)
    with App(settings) as app:
        app.load_model()
        if args.remember:
            app.graph.remember_states()
        sync_vault(settings, app.kodb, app.graph, app.embedder)  # whatever was pending
        t0 = time.perf_counter()
        sync_vault(settings, app.kodb, app.graph, app.embedder)
        noop = time.perf_counter() - t0
        notes = sorted(app.kodb.notes())
        note = Path(args.vault) / notes[len(notes) // 2]
        runs: list[float] = []
        profile = cProfile.Profile()
        for i in range(args.edits):
            note.write_text(note.read_text("utf-8") + f"\nEdit {i} by sync_runs.\n", "utf-8")
            last = args.profile and i == args.edits - 1
            t0 = time.perf_counter()
            if last:
                profile.enable()
            report = sync_vault(settings, app.kodb, app.graph, app.embedder)
            if last:
                profile.disable()
            runs.append(time.perf_counter() - t0)
            assert report.embed.embedded == 1, report.embed
    if args.profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    print(f"{len(notes)} notes: no-op run {noop:.2f} s; one-note edits {runs}")
    print(
        f"RESULT notes={len(notes)} noop_run_s={noop:.3f} "
        f"edit_run_median_s={statistics.median(runs):.3f} edit_run_max_s={max(runs):.3f}"
    )


if __name__ == "__main__":
    main()
