"""KO-DB subject search: trigram-accelerated search vs a plain Python scan, side by side.

Builds a throwaway SQLite KO-DB (in a temp dir) with N distinct subjects, then times
``KoDB.search_subjects`` (FTS5 trigram pre-filter + word-boundary check) against
``reference_search`` over all subject_norms already in memory (the best a full scan can do),
on the same terms, and checks both return the same subjects. With ``--pg-url`` the same run
is made on a fresh PostgreSQL database created (and dropped) under that server.

The last line is ``RESULT subjects=<n> sqlite_p50_ms=<x> scan_p50_ms=<x> speedup=<x>``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pipeline.kodb import KoDB, reference_search, scratch_database
from pipeline.model import Fact

LETTERS = "abcdefghijklmnopqrstuvwxyzáéíóöőúüű"


def build_subjects(n: int, rng: random.Random) -> list[str]:
    words = ["".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 9))) for _ in range(5000)]
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) + f" {i}" for i in range(n)
    ]


def time_search(db: KoDB, terms: list[str], norms: list[str]) -> tuple[list[float], list[float]]:
    db_ms: list[float] = []
    scan_ms: list[float] = []
    for term in terms:
        t0 = time.perf_counter()
        got = db.search_subjects(term)
        db_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        expected = reference_search(term, norms)
        scan_ms.append((time.perf_counter() - t0) * 1000)
        if got != expected:
            raise SystemExit(f"mismatch for {term!r}: {len(got)} vs {len(expected)}")
    return db_ms, scan_ms


def load(db: KoDB, subjects: list[str]) -> None:
    facts = [Fact(s, "is", "x", 0.5, "wiki", f"f{i % 500}.md") for i, s in enumerate(subjects)]
    db.import_facts(facts)
    db.analyze()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=50_000)
    parser.add_argument("--terms", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pg-url", help="PostgreSQL server URL (admin database), optional")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    subjects = build_subjects(args.subjects, rng)
    terms = [rng.choice(rng.choice(subjects).split()[:-1] or ["x"]) for _ in range(args.terms)]

    with (
        tempfile.TemporaryDirectory() as tmp,
        KoDB.open(f"sqlite:///{Path(tmp) / 'ko.db'}") as db,
    ):
        t0 = time.perf_counter()
        load(db, subjects)
        print(f"sqlite: loaded {len(subjects)} subjects in {time.perf_counter() - t0:.1f}s")
        norms = db.subject_norms()
        sqlite_ms, scan_ms = time_search(db, terms, norms)
    sqlite_p50 = statistics.median(sqlite_ms)
    scan_p50 = statistics.median(scan_ms)
    print(f"sqlite trigram search p50 {sqlite_p50:.2f} ms; python full scan p50 {scan_p50:.2f} ms")

    if args.pg_url:
        with scratch_database(args.pg_url, "vaultko_bench") as url, KoDB.open(url) as db:
            load(db, subjects)
            pg_ms, _ = time_search(db, terms, db.subject_norms())
        print(f"postgresql trigram search p50 {statistics.median(pg_ms):.2f} ms")

    print(
        f"RESULT subjects={len(subjects)} sqlite_p50_ms={sqlite_p50:.2f} "
        f"scan_p50_ms={scan_p50:.2f} speedup={scan_p50 / sqlite_p50:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
