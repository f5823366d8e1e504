"""PostgreSQL ingest by step, and subject look-up by word vs pg_trgm, on one new database.

The corpus vault (make_corpus.py; ``--notes`` 20,000 by default, its facts file is not
imported) is copied to a temp folder and ingested into a scratch PostgreSQL database
(``vaultko_phases_<hex>``, dropped at the end) with the KO-DB store's write steps wrapped
in timers: how long the facts, the subject summaries and the note texts take of the run.
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
import random
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
from pipeline.kodb import store as kodb_store  # noqa: E402

#: The store's write steps timed (methods of KoDB).
STEPS = ("_insert_facts", "_insert_rows", "_refresh_stats", "_replace_texts", "_flush_gin")


def timed_steps() -> tuple[dict[str, float], Callable[[], None]]:
    """Wrap the steps in timers; returns the totals and a function that unwraps them."""
    totals = dict.fromkeys(STEPS, 0.0)
    originals = {name: getattr(KoDB, name) for name in STEPS}

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
        setattr(KoDB, name, wrap(name, fn))

    def restore() -> None:
        for name, fn in originals.items():
            setattr(KoDB, name, fn)

    return totals, restore


def look_up(db: KoDB, batches: list[list[str]], words: bool) -> tuple[float, list[Any]]:
    """p50 ms of ``search_subjects_many`` over the batches, and the results."""
    original = kodb_store.word_runs
    if not words:  # no term has word runs: all go by pg_trgm, as before migration 9
        kodb_store.word_runs = lambda _norm: ""
    try:
        times, found = [], []
        for batch in batches:
            t0 = time.perf_counter()
            found.append(db.search_subjects_many(batch))
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times), found
    finally:
        kodb_store.word_runs = original


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
                    report = ingest_vault(settings.replace(kodb_url=url), db)
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
    print(
        f"subjects of 20 titles by word: {by_word:.2f} ms p50 (again {again:.2f}); "
        f"by pg_trgm: {by_trgm:.2f} ms; {by_trgm / by_word:.1f}x; identical {identical}"
    )
    steps = " ".join(f"{n.strip('_')}_s={totals[n]:.2f}" for n in STEPS)
    print(
        f"RESULT ingest_pg_notes_per_s={rate:.1f} {steps} words_p50_ms={by_word:.2f} "
        f"trgm_p50_ms={by_trgm:.2f} identical={str(identical).lower()}"
    )
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
