"""A warm question at scale: the graph's index search (the CLI path) vs the service's
in-memory exact search, per stage, in one process; optionally through a running service.

Run against a vault that is ingested (facts imported as wanted) with its local graph up.
``--synthetic`` first gives every registry note without a node a seeded, clustered unit
vector written through ``GraphClient.upsert_notes`` (for measuring search at 20,000 notes
without a 20,000-note embed; answers are then not meaningful, timings are).

Per question, in turn: ``Pipeline.ask`` (graph check, embed, index search with over-fetch
and exact re-score, bridge, KO-DB, rank) and ``WarmAnswers.ask`` (generation read, embed,
exact search over the warm matrix, same stages after), then ``--url``'s ``POST /query``.
``--retrieval dense,hybrid`` times both side by side (the first's keys as before, the
others' prefixed: ``hybrid_warm_p50_ms``). The last line is ``RESULT notes=… facts=…
retrieval=… index_p50_ms=… warm_p50_ms=… …``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from pipeline.app import App
from pipeline.config import load_settings
from pipeline.embed import BUNDLED_MODEL_ID
from pipeline.graph import GraphNote
from pipeline.query import QueryOptions
from pipeline.service.server import service_threads
from pipeline.service.warm import WarmAnswers

#: Synthetic vectors: this many cluster centres, noise of this size around them.
CLUSTERS = 200
NOISE = 0.6
WRITE_CHUNK = 500


def fill_synthetic(app: App, seed: int = 14) -> int:
    """Write a clustered unit vector for every registry note that has no node yet."""
    rng = np.random.default_rng(seed)
    registry = app.kodb.notes()
    app.graph.ensure_schema(384)
    missing = sorted(set(registry) - set(app.graph.note_states()))
    centres = rng.standard_normal((CLUSTERS, 384))
    for start in range(0, len(missing), WRITE_CHUNK):
        rows = []
        for path in missing[start : start + WRITE_CHUNK]:
            v = centres[rng.integers(CLUSTERS)] + NOISE * rng.standard_normal(384)
            v = (v / np.linalg.norm(v)).astype(np.float32)
            note = registry[path]
            rows.append(
                GraphNote(
                    path,
                    note.title,
                    note.source_type,
                    note.content_hash,
                    BUNDLED_MODEL_ID,
                    384,
                    time.time(),
                    tuple(v.tolist()),
                )
            )
        app.graph.upsert_notes(rows)
    return len(missing)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--url", help="a running service's base URL, e.g. http://127.0.0.1:PORT")
    parser.add_argument(
        "--retrieval",
        default="",
        help="comma-separated retrievals to time side by side (dense,hybrid) [the setting's]",
    )
    args = parser.parse_args(argv)
    settings = load_settings(str(args.vault))
    service_threads()  # torch and BLAS threads as the service runs
    with App(settings) as app:
        if args.synthetic:
            t0 = time.perf_counter()
            written = fill_synthetic(app)
            print(f"synthetic vectors written: {written} in {time.perf_counter() - t0:.1f} s")
        titles = sorted(n.title for n in app.kodb.notes().values())
        step = max(1, len(titles) // args.questions)
        questions = [f"what do we know about {t}?" for t in titles[::step][: args.questions]]
        retrievals = [r for r in args.retrieval.split(",") if r] or [settings.query_retrieval]
        options = {r: QueryOptions.from_settings(settings, retrieval=r) for r in retrievals}
        opts = options[retrievals[0]]
        pipeline = app.pipeline()
        warm = WarmAnswers(app)
        for o in options.values():
            pipeline.ask(questions[0], o)  # model, connections and each mode's caches warm
        t0 = time.perf_counter()
        warm.ask(questions[0], opts)  # starts the background load of the vectors
        warm.settle()
        load_s = time.perf_counter() - t0
        stages: dict[str, dict[str, list[float]]] = {}
        for q in questions:  # interleaved, so the machine's drift hits every mode alike
            for retrieval, o in options.items():
                for name, ask in (("index", pipeline.ask), ("warm", warm.ask)):
                    answer = ask(q, o)
                    by_stage = stages.setdefault(f"{name} {retrieval}", {})
                    for stage, ms in answer.timings_ms.items():
                        by_stage.setdefault(stage, []).append(ms)
        service: list[float] = []
        if args.url:
            import httpx

            with httpx.Client(base_url=args.url, timeout=30) as http:
                http.post("/query", json={"question": questions[0]})
                for q in questions:
                    t0 = time.perf_counter()
                    http.post("/query", json={"question": q}).raise_for_status()
                    service.append((time.perf_counter() - t0) * 1e3)
        notes, facts = len(titles), app.kodb.count_facts()
    print(f"notes={notes} facts={facts} vectors loaded in {load_s:.2f} s")
    print("| path | stage | p50 ms | p95 ms |\n|---|---|---|---|")
    for name, by_stage in stages.items():
        for stage, values in sorted(by_stage.items()):
            print(
                f"| {name} | {stage} | {statistics.median(values):.1f} | {pct(values, 0.95):.1f} |"
            )
    if service:
        print(
            f"| service | POST /query | {statistics.median(service):.1f} "
            f"| {pct(service, 0.95):.1f} |"
        )
    extra = f" service_p50_ms={statistics.median(service):.1f}" if service else ""
    for retrieval in retrievals:  # the first retrieval's keys as before; others prefixed
        key = "" if retrieval == retrievals[0] else f"{retrieval}_"
        idx, wrm = stages[f"index {retrieval}"], stages[f"warm {retrieval}"]
        extra += (
            f" {key}index_p50_ms={statistics.median(idx['total_ms']):.1f}"
            f" {key}warm_p50_ms={statistics.median(wrm['total_ms']):.1f}"
            f" {key}index_graph_p50_ms={statistics.median(idx['graph_ms']):.1f}"
            f" {key}warm_graph_p50_ms={statistics.median(wrm['graph_ms']):.1f}"
        )
    print(
        f"RESULT notes={notes} facts={facts} retrieval={retrievals[0]} "
        f"vector_load_s={load_s:.2f}{extra}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
