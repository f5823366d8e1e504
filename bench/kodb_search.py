"""KO-DB subject search with its index against a plain LIKE scan, side by side.

On make_corpus.py's facts (the seed's 13,000 rows and the full file, 1,000,000 by default),
on SQLite and on PostgreSQL: ``KoDB.search_subjects`` (SQLite FTS5 trigram / PostgreSQL
pg_trgm GIN pre-filter on the ``subjects`` table, then the word-boundary check) against the
query a KO-DB without that index would run: ``SELECT DISTINCT subject_norm FROM facts WHERE
subject_norm LIKE '%term%'`` (a full scan of the facts table), then the same word-boundary
check. Both must return the same subjects for every term (checked), and
``reference_search`` (the pure-Python semantics) too. Also the registry's read of notes by
date (``KoDB.notes_dated``) on the full-size databases.

Self-contained when run alone: the 13,000-row databases are built here (SQLite in a temp
dir, PostgreSQL in a scratch database), the full-size ones by the World (facts imported with
``vault-ko facts import``). Run: ``.venv/bin/python bench/kodb_search.py [--quick]``; the last
line is ``RESULT …``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
from pathlib import Path

from harness import (
    Report,
    Row,
    World,
    add_common_args,
    log,
    p50_p95,
    pct,
    ratio,
    sizes,
    timed_ms,
    world_or,
)
from make_corpus import SEED_FACTS

TERMS_FULL = 50
TERMS_QUICK = 15


def like_scan(db: object, term: str) -> list[str]:
    """Subjects matching ``term`` by a LIKE over every fact row (no index on it)."""
    import sqlalchemy as sa

    from pipeline.kodb import contains_pattern, normalize_term, word_boundary_match
    from pipeline.kodb.match import LIKE_ESCAPE
    from pipeline.kodb.schema import facts

    norm = normalize_term(term)
    stmt = (
        sa.select(facts.c.subject_norm)
        .where(facts.c.subject_norm.like(contains_pattern(norm), escape=LIKE_ESCAPE))
        .distinct()
    )
    with db._tx() as conn:  # type: ignore[attr-defined]
        found = {row[0] for row in conn.execute(stmt)}
    return sorted(s for s in found if word_boundary_match(norm, s))


def pick_terms(norms: list[str], n: int, seed: int) -> list[str]:
    """Words of existing subjects (≥ 3 letters), a few two-word phrases and a few misses."""
    rng = random.Random(seed)
    terms: list[str] = []
    while len(terms) < n:
        words = [w for w in rng.choice(norms).split() if len(w) >= 3]
        if not words:
            continue
        r = rng.random()
        if r < 0.15 and len(words) > 1:
            terms.append(" ".join(words[:2]))
        elif r < 0.2:
            terms.append(words[0] + "zq")  # no subject has it
        else:
            terms.append(rng.choice(words))
    return terms


def measure(db: object, label: str, terms: list[str]) -> dict[str, object]:
    from pipeline.kodb import reference_search

    norms = db.subject_norms()  # type: ignore[attr-defined]
    for term in terms[:3]:  # warm caches on both paths
        db.search_subjects(term)  # type: ignore[attr-defined]
        like_scan(db, term)
    index_ms: list[float] = []
    scan_ms: list[float] = []
    identical = True
    for term in terms:
        ms, got = timed_ms(lambda t=term: db.search_subjects(t))  # type: ignore[attr-defined]
        index_ms.append(ms)
        ms, want = timed_ms(lambda t=term: like_scan(db, t))
        scan_ms.append(ms)
        if got != want or got != reference_search(term, norms):
            identical = False
            log(f"{label}: mismatch for {term!r}: {len(got)} vs {len(want)}")
    return {
        "facts": db.count_facts(),  # type: ignore[attr-defined]
        "subjects": len(norms),
        "index_ms": index_ms,
        "scan_ms": scan_ms,
        "identical": identical,
    }


def add_rows(report: Report, key: str, label: str, m: dict[str, object]) -> None:
    index_ms, scan_ms = m["index_ms"], m["scan_ms"]
    assert isinstance(index_ms, list) and isinstance(scan_ms, list)
    speedup = ratio(pct(scan_ms, 50), pct(index_ms, 50))
    report.add(
        Row(
            f"subject search, {label} ({m['facts']:,} facts, {m['subjects']:,} subjects, "
            f"{len(index_ms)} terms): index p50 / p95",
            p50_p95(index_ms),
            f"LIKE scan of facts {p50_p95(scan_ms)}",
            f"{speedup:.1f}× (p50)",
            "identical" if m["identical"] else "**DIFFERENT**",
        ),
        **{
            f"{key}_index_p50_ms": pct(index_ms, 50),
            f"{key}_scan_p50_ms": pct(scan_ms, 50),
            f"{key}_speedup": speedup,
            f"{key}_identical": m["identical"],
        },
    )


def dated_reads(report: Report, key: str, label: str, db: object, n: int, seed: int) -> None:
    """``KoDB.notes_dated`` as a question about a period or the latest alone reads it (the
    newest 20 notes dated up to a day, or in a month), timed; the registry has no index on
    the date, so this is a scan of it."""
    import calendar

    rng = random.Random(seed)
    notes = db.count_notes()  # type: ignore[attr-defined]
    dated: list[float] = []
    found = 0
    for i in range(n):
        year, month = rng.randint(2016, 2026), rng.randint(1, 12)
        last = f"{year}-{month:02d}-{calendar.monthrange(year, month)[1]:02d}"
        start = None if i % 2 else f"{year}-{month:02d}-01"
        ms, rows = timed_ms(lambda s=start, e=last: db.notes_dated(s, e, 20))  # type: ignore[attr-defined]
        dated.append(ms)
        found += len(rows)
    report.add(
        Row(
            f"notes by date, {label} ({notes:,} notes, {n} reads, half a month's, half the "
            "newest up to a day; 20 each): p50 / p95",
            p50_p95(dated),
            f"{found / n:.1f} notes a read",
        ),
        **{f"{key}_dated_p50_ms": pct(dated, 50), f"{key}_dated_p95_ms": pct(dated, 95)},
    )


def run(report: Report, args: argparse.Namespace, world: World | None = None) -> None:
    from pipeline.facts_import import read_fact_file
    from pipeline.kodb import KoDB, scratch_database

    n_terms = TERMS_QUICK if args.quick else TERMS_FULL
    with world_or(world, args, graph=False) as w:
        small_file = w.corpus.facts_file(SEED_FACTS)
        small = read_fact_file(small_file).facts
        backends: list[tuple[str, str, str]] = [("sqlite", "SQLite", w.settings.effective_kodb_url)]
        if w.pg_url:
            backends.append(("pg", "PostgreSQL", w.pg_url))
        for key, label, big_url in backends:
            with tempfile.TemporaryDirectory() as tmp:
                if key == "sqlite":
                    small_ctx = contextlib.nullcontext(f"sqlite:///{Path(tmp) / 'ko13k.db'}")
                else:
                    small_ctx = scratch_database(args.pg_url, "vaultko_bench")
                with small_ctx as small_url, KoDB.open(small_url) as db:
                    db.import_facts(small)
                    db.analyze()
                    terms = pick_terms(db.subject_norms(), n_terms, args.seed)
                    add_rows(report, f"{key}_13k", label, measure(db, label, terms))
            with KoDB.open(big_url) as db:
                db.analyze()
                terms = pick_terms(db.subject_norms(), n_terms, args.seed)
                add_rows(report, f"{key}_full", label, measure(db, label, terms))
                dated_reads(report, key, label, db, n_terms, args.seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    args = parser.parse_args()
    sizes(args)
    report = Report()
    run(report, args)
    report.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
