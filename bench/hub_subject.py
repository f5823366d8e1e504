"""A hub subject of 100,000 facts: the answer's KO-DB + rank cost, all facts vs summaries.

The sample vault (examples/vault, its facts file) is ingested into a fresh SQLite file (and
a scratch PostgreSQL database), then one subject (``Redis``) gets ``--hub-facts`` more facts
(half of them one flooding predicate, over 40 files and the three source types). The same
questions are answered in-process, degraded mode (no graph or model needed; the KO-DB and
rank stages are the semantic mode's), by the answer path as it was (every fact of every
candidate subject fetched and grouped in Python: ``rank.rank_subjects``) and by the current
one (``KoDB.subject_summaries`` + ``rank.rank_summaries``), interleaved, after a warm-up;
the answers must be identical. Prints p50 of the total and of the KO-DB + rank stages.

Run: ``.venv/bin/python bench/hub_subject.py [--hub-facts 100000] [--repeat 20]``
(``--pg-url ''`` skips PostgreSQL).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.app import App  # noqa: E402
from pipeline.config import load_settings  # noqa: E402
from pipeline.ingest import ingest_vault  # noqa: E402
from pipeline.kodb import KoDB, scratch_database  # noqa: E402
from pipeline.model import Fact  # noqa: E402
from pipeline.query import Pipeline, QueryOptions  # noqa: E402
from pipeline.rank import rank_subjects  # noqa: E402

QUESTIONS = (
    "How is Redis deployed and what eviction policy does it use?",
    "redis cache invalidation",
    "Who owns Redis and the warm cache?",
    "Kafka and Redis in the billing service",
)
DEFAULT_PG = os.environ.get(
    "VAULT_KO_BENCH_PG_URL",
    os.environ.get("VAULT_KO_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
)


class AllFactsPipeline(Pipeline):
    """The answer path before summaries: every fact of every candidate, ranked in Python."""

    def _summaries(self, candidates: Any, opts: QueryOptions, evidence: Any) -> Any:
        facts = self.kodb.facts_for_subjects(candidates)
        if opts.session_notes_only:
            facts = [f for f in facts if f.source_file in evidence]
        return facts

    def _rank(
        self, facts: Any, opts: QueryOptions, candidates: Any, timer: Any, *a: Any, **kw: Any
    ) -> Any:
        evidence = a[1] if len(a) > 1 else None
        with timer.stage("rank_ms"):
            return tuple(
                rank_subjects(
                    facts,
                    top_k=opts.top_k,
                    facts_per_subject=opts.facts_per_subject,
                    facts_per_predicate_cap=opts.facts_per_predicate_cap,
                    candidates=candidates,
                    top_bm25=kw.get("top_bm25"),
                    order=self.order,
                    evidence_files=evidence,
                    crystal_only=opts.crystal_only,
                )
            )


def hub_facts(n: int) -> Iterator[Fact]:
    types = ("wiki", "session", "adr")
    for i in range(n):
        stype = types[i % 3]
        folder = {"wiki": "wiki", "session": "sessions", "adr": "adr"}[stype]
        pred = "has_value" if i % 2 else f"measured_{i % 13}"
        yield Fact("Redis", pred, f"value {i}", (i % 97) / 100, stype, f"{folder}/hub-{i % 40}.md")  # type: ignore[arg-type]


def build(url: str, state: Path, n: int) -> None:
    settings = replace(load_settings(ROOT / "examples" / "vault"), state_dir=state, kodb_url=url)
    with KoDB.open(url) as db:
        ingest_vault(settings, db)
        with open(ROOT / "examples" / "facts.jsonl", encoding="utf-8") as fh:
            db.import_facts(Fact(**json.loads(line)) for line in fh if line.strip())
        db.import_facts(hub_facts(n))
        db.analyze()


def measure(url: str, state: Path, repeat: int) -> dict[str, Any]:
    settings = replace(load_settings(ROOT / "examples" / "vault"), state_dir=state, kodb_url=url)
    app = App(settings)
    new, old = Pipeline(app=app), AllFactsPipeline(app=app)
    opts = QueryOptions.from_settings(settings, semantic=False)
    times: dict[str, list[float]] = {"old": [], "new": [], "old_kr": [], "new_kr": []}
    for q in QUESTIONS:  # warm-up, and the answers must be the same
        a, b = old.ask(q, opts), new.ask(q, opts)
        if a.subjects != b.subjects:
            raise SystemExit(f"answers differ for {q!r}")
    for i in range(repeat):
        q = QUESTIONS[i % len(QUESTIONS)]
        for name, p in (("old", old), ("new", new)):
            t0 = time.perf_counter()
            answer = p.ask(q, opts)
            times[name].append((time.perf_counter() - t0) * 1e3)
            ms = answer.timings_ms
            times[name + "_kr"].append(ms.get("kodb_ms", 0.0) + ms.get("rank_ms", 0.0))
    app.close()
    return {k: statistics.median(v) for k, v in times.items()}


def report(label: str, m: dict[str, float]) -> None:
    print(
        f"{label}: total p50 all facts {m['old']:.1f} ms, summaries {m['new']:.1f} ms "
        f"({m['old'] / m['new']:.1f}×); KO-DB + rank p50 {m['old_kr']:.1f} → "
        f"{m['new_kr']:.1f} ms ({m['old_kr'] / m['new_kr']:.1f}×)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hub-facts", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--pg-url", default=DEFAULT_PG)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        url = f"sqlite:///{state / 'ko.db'}"
        build(url, state, args.hub_facts)
        report(f"SQLite, hub of {args.hub_facts:,} facts", measure(url, state, args.repeat))
        if args.pg_url:
            with contextlib.ExitStack() as stack:
                pg = stack.enter_context(scratch_database(args.pg_url, "vaultko_bench"))
                build(pg, state, args.hub_facts)
                m = measure(pg, state, args.repeat)
            report(f"PostgreSQL, hub of {args.hub_facts:,} facts", m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
