"""PostgreSQL ingest by step, and subject look-up by word vs pg_trgm, on one new database.

The corpus vault (make_corpus.py; ``--notes`` 20,000 by default, its facts file is not
imported) is copied to a temp folder and ingested into a scratch PostgreSQL database
(``vaultko_phases_<hex>``, dropped at the end) with the KO-DB store's write steps wrapped
in timers: how long the facts, the subject summaries and the note texts take of the run,
and the CPU seconds it cost vault-ko (parse workers included) and the server's processes
(read from /proc when the server is local): on a shared machine the CPU seconds vary far
less between runs than the wall time does.
Then, on the committed database, the same batches of 20 note titles are looked up as the
bridge looks them up, alternately by the word index (GIN over ``subjects.words``' runs,
migration 9) and by pg_trgm (every term sent down the trigram path), and the results are
checked identical.

Run: ``.venv/bin/python bench/pg_ingest_phases.py [--notes 20000] [--batches 40]``; the
last line is ``RESULT …``.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness import DEFAULT_PG_URL  # noqa: E402
from make_corpus import ensure_corpus  # noqa: E402

from pipeline.config import load_settings  # noqa: E402
from pipeline.ingest import ingest_vault  # noqa: E402
from pipeline.kodb import KoDB, scratch_database  # noqa: E402
from pipeline.kodb import notes as kodb_notes  # noqa: E402
from pipeline.kodb import subject_search as kodb_search  # noqa: E402
from pipeline.kodb import writes as kodb_writes  # noqa: E402
from pipeline.kodb.dialects.postgresql import PostgresDialect  # noqa: E402

#: The store's write steps timed: step -> (the module or class holding it, its name).
STEPS: dict[str, tuple[Any, str]] = {
    "insert_facts": (kodb_writes, "insert_facts"),
    "insert_rows": (PostgresDialect, "insert_rows"),
    "refresh_stats": (kodb_writes, "refresh_stats"),
    "replace_texts": (kodb_notes, "replace_texts"),
    "flush_gin": (PostgresDialect, "flush_indexes"),
}


def timed_steps() -> tuple[dict[str, float], Callable[[], None]]:
    """Wrap the steps in timers; returns the totals and a function that unwraps them."""
    totals = dict.fromkeys(STEPS, 0.0)
    originals = {name: getattr(owner, attr) for name, (owner, attr) in STEPS.items()}

    def wrap(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                totals[name] += time.perf_counter() - t0

        return timed

    for name, fn in originals.items():
        owner, attr = STEPS[name]
        setattr(owner, attr, wrap(name, fn))

    def restore() -> None:
        for name, fn in originals.items():
            owner, attr = STEPS[name]
            setattr(owner, attr, fn)

    return totals, restore


def cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children (the parse workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def server_cpu_seconds(db: KoDB) -> float | None:
    """CPU seconds of the server processes serving ``db``'s open connections, the pooled one
    ingest used among them (read from /proc: only when the server runs on this machine;
    None otherwise)."""
    with db._engine.connect() as conn:
        pids = (
            conn.exec_driver_sql(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            )
            .scalars()
            .all()
        )
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def look_up(db: KoDB, batches: list[list[str]], words: bool) -> tuple[float, list[Any]]:
    """p50 ms of ``search_subjects_many`` over the batches, and the results."""
    original = kodb_search.word_runs
    if not words:  # no term has word runs: all go by pg_trgm, as before migration 9
        kodb_search.word_runs = lambda _norm: ""
    try:
        times, found = [], []
        for batch in batches:
            t0 = time.perf_counter()
            found.append(db.search_subjects_many(batch))
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times), found
    finally:
        kodb_search.word_runs = original


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--batches", type=int, default=40, help="batches of 20 titles")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    corpus = ensure_corpus(args.notes, 13_000, args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="vault-ko-phases-"))
    try:
        vault = tmp / "vault"
        shutil.copytree(corpus.vault, vault)
        settings = load_settings(vault, env={})
        with scratch_database(args.pg_url, "vaultko_phases") as url:
            totals, restore = timed_steps()
            try:
                with KoDB.open(url) as db:
                    cpu0 = cpu_seconds()
                    report = ingest_vault(settings.replace(kodb_url=url), db)
                    client_cpu = cpu_seconds() - cpu0
                    server_cpu = server_cpu_seconds(db)
            finally:
                restore()
            with KoDB.open(url) as db:
                titles = sorted(n.title for n in db.notes().values())
                rng = random.Random(3)
                batches = [rng.sample(titles, min(20, len(titles))) for _ in range(args.batches)]
                look_up(db, batches[:3], True)  # warm the connection and the caches
                by_word, found_word = look_up(db, batches, True)
                by_trgm, found_trgm = look_up(db, batches, False)
                again, found_again = look_up(db, batches, True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    identical = found_word == found_trgm == found_again
    rate = report.notes_total / report.seconds
    print(
        f"ingest of {report.notes_total:,} notes into PostgreSQL: {report.seconds:.1f} s "
        f"({rate:.0f} notes/s), {report.facts_total:,} facts"
    )
    for name in STEPS:
        print(f"  {name:16s} {totals[name]:7.2f} s")
    shown = "not readable" if server_cpu is None else f"{server_cpu:.1f} s"
    print(f"CPU: vault-ko {client_cpu:.1f} s (parse workers included), server {shown}")
    print(
        f"subjects of 20 titles by word: {by_word:.2f} ms p50 (again {again:.2f}); "
        f"by pg_trgm: {by_trgm:.2f} ms; {by_trgm / by_word:.1f}x; identical {identical}"
    )
    steps = " ".join(f"{n}_s={totals[n]:.2f}" for n in STEPS)
    server = "na" if server_cpu is None else f"{server_cpu:.2f}"
    print(
        f"RESULT ingest_pg_notes_per_s={rate:.1f} {steps} client_cpu_s={client_cpu:.2f} "
        f"server_cpu_s={server} words_p50_ms={by_word:.2f} "
        f"trgm_p50_ms={by_trgm:.2f} identical={str(identical).lower()}"
    )
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
