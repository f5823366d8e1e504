"""The one benchmark entry point: every part on make_corpus.py's data, one markdown table.

Builds the World once (harness.py: the corpus vault in a temp folder, ingested into SQLite
and a scratch PostgreSQL database, the facts file imported with `vault-ko facts import`, its
own local ArcadeDB loaded from the embedding cache), then runs the parts in order:

  kodb       bench/kodb_search.py      subject search: index vs LIKE scan, 13k and full facts
  ann        bench/ann_recall.py       graph vector search vs exact numpy: recall@10, latency
  query      bench/query_latency.py    warm query per stage, in-process and `vault-ko serve`;
                                       degraded (full text) and hybrid on SQLite and PostgreSQL;
                                       the full-text index's build time and size
  session    bench/session_batch.py    load-context of many prompts vs single queries
  embed      bench/embed_throughput.py `vault-ko embed` vs bare encode; 1 % incremental vs full
  sync       bench/scale_sync.py       no-op sync, incremental sync at full size (it edits
                                       notes: last); the World's own rows (ingest notes/s,
                                       facts import rows/s and peak memory) come first
  watch      bench/watch_live.py       `vault-ko serve --watch`: an edit to a found answer,
                                       a burst against `sync`, idle CPU (file events and
                                       polling), memory over a soak of an edit a second (it
                                       edits notes: after sync)
  cold       bench/cold_query.py       fresh processes on examples/vault, no service: cold
                                       query and hook (prepared model vs torch path), with
                                       the service up, `--help` (its own graph and cache)

Each part also runs alone (``python bench/<part>.py``). Every row compares figures measured
in this run; the output ends with ``RESULT key=value …`` lines.

Full run (20,000 notes, 1,000,000 facts; about 40 minutes on this shared 2-CPU machine):
    .venv/bin/python bench/run.py
CI smoke run (200 notes, 13,000 facts, a few questions; the code must not rot, the figures
do not count):
    .venv/bin/python bench/run.py --quick
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

import ann_recall
import cold_query
import embed_throughput
import kodb_search
import query_latency
import scale_sync
import session_batch
import watch_live
from harness import ROOT, Report, World, add_common_args, log, sizes

PARTS = {
    "kodb": kodb_search,
    "ann": ann_recall,
    "query": query_latency,
    "session": session_batch,
    "embed": embed_throughput,
    "sync": scale_sync,
    "watch": watch_live,
    "cold": cold_query,
}
NEEDS_WORLD = ("kodb", "ann", "query", "session", "sync", "watch")
NEEDS_GRAPH = ("ann", "query", "session", "sync", "watch")


def machine() -> str:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"commit {commit or '?'}{' (+ local changes)' if dirty else ''}; {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {mem:.0f} GiB RAM, Python {platform.python_version()}, "
        f"load average at start {load:.1f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--queries", type=int, help="questions per query mode (30; quick 6)")
    parser.add_argument("--prompts", type=int, help="load-context prompts (1000; quick 12)")
    parser.add_argument(
        "--loop-prompts", type=int, help="of them, answered one by one too (100; quick 12)"
    )
    parser.add_argument("--embed-notes", type=int, help="notes of the embed part (150; quick 10)")
    parser.add_argument("--repeat", type=int, help="load-context batch runs (median; 2, quick 1)")
    cold_query.add_args(parser)
    watch_live.add_args(parser)
    parser.add_argument(
        "--only", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}"
    )
    args = parser.parse_args()
    wanted = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = set(wanted) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    if args.repeat is None:
        args.repeat = 1 if args.quick else 2
    size = sizes(args)
    started = time.perf_counter()
    header = machine()
    log(f"bench: {header}; sizes {size}")
    report = Report()
    world: World | None = None
    interrupted = False
    try:
        if any(p in NEEDS_WORLD for p in wanted):
            world = World(args, graph=any(p in NEEDS_GRAPH for p in wanted)).__enter__()
            scale_sync.write_rows(report, world)
        for name in wanted:
            t0 = time.perf_counter()
            log(f"bench: part {name}")
            PARTS[name].run(report, args, world if name in NEEDS_WORLD else None)
            log(f"bench: part {name} took {time.perf_counter() - t0:.0f} s")
    except KeyboardInterrupt:  # Ctrl-C: the rows measured so far are still printed
        interrupted = True
    finally:
        if world is not None:
            world.__exit__(None, None, None)
    elapsed = time.perf_counter() - started
    mode = ("quick" if args.quick else "full") + ("-interrupted" if interrupted else "")
    print(
        f"\n{mode} run: {size['notes']:,} notes, {size['facts']:,} facts (corpus seed "
        f"{args.seed}); {header}; {elapsed / 60:.1f} min"
    )
    report.results["mode"] = mode
    report.results["elapsed_s"] = round(elapsed, 1)
    report.print()
    failed = sorted(k for k, v in report.results.items() if k.endswith("_identical") and not v)
    if failed:
        print(f"FAILED checks: {', '.join(failed)}")
    return 1 if failed or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
