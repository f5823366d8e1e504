"""Graph vector search against an exact numpy scan of the same vectors: recall@10, latency.

On make_corpus.py's vault (20,000 notes by default; their MiniLM embeddings from the corpus
cache) loaded into the World's own local ArcadeDB: each question (``--queries``, embedded
with the real model) is searched by ``GraphClient.vector_search`` (the index over-fetches
``graph_candidates``, the best candidates are re-scored exactly) and by brute force over the
stored float32 vectors in memory (``GraphClient.all_vectors`` once). recall@10 = |graph
top-10 ∩ exact top-10| / 10, averaged; p50 / p95 of each path.

Run: ``.venv/bin/python bench/ann_recall.py [--quick]``; the last line is ``RESULT …``.
(The earlier version measured clustered random vectors; BENCHMARKS.md keeps that table.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace

from harness import Report, Row, World, add_common_args, log, p50_p95, pct, ratio, world_or

from pipeline.batch.exact import ExactSearch

K = 10


def run(report: Report, args: argparse.Namespace, world: World | None = None) -> None:
    import time

    with world_or(world, args, facts=False) as w:
        graph = w.app.graph
        questions = w.questions(w.size["queries"], seed=11)
        vectors = w.embedder.embed(questions)
        t0 = time.perf_counter()
        states, matrix = graph.all_vectors()
        load_ms = (time.perf_counter() - t0) * 1e3
        paths = [s.path for s in states]
        # A long note has a row per passage: the truth scores notes as a search does.
        exact = ExactSearch(paths, [""] * len(paths), [""] * len(paths), matrix)
        graph.vector_search(vectors[0], K)  # the index graph is built on first use
        exact_ms: list[float] = []
        truths = []
        for vector in vectors:
            t0 = time.perf_counter()
            best = exact.top_k(vector, exact.shortlist_scores(vector[None, :])[0], K) or []
            truths.append({h.path for h in best})
            exact_ms.append((time.perf_counter() - t0) * 1e3)

        def measure() -> tuple[float, list[float]]:
            took: list[float] = []
            recall: list[float] = []
            for vector, truth in zip(vectors, truths, strict=True):
                t0 = time.perf_counter()
                hits = graph.vector_search(vector, K)
                took.append((time.perf_counter() - t0) * 1e3)
                recall.append(len(truth & {h.path for h in hits}) / K)
            return statistics.fmean(recall), took

        r, graph_ms = measure()
        log(f"ann: all_vectors of {exact.notes} notes ({len(paths)} vectors) in {load_ms:.0f} ms")
        report.add(
            Row(
                f"graph vector search, {len(paths):,} notes, k={K}, {len(vectors)} questions: "
                f"recall@{K}, p50 / p95",
                f"recall {r:.3f}, {p50_p95(graph_ms)}",
                f"exact numpy over all vectors {p50_p95(exact_ms)} "
                f"(loading them: {load_ms:.0f} ms once)",
                f"{ratio(pct(graph_ms, 50), pct(exact_ms, 50)):.1f}× slower (p50)",
                "recall ≥ 0.99" if r >= 0.99 else "recall < 0.99",
            ),
            recall_at_10=r,
            graph_search_p50_ms=pct(graph_ms, 50),
            graph_search_p95_ms=pct(graph_ms, 95),
            exact_search_p50_ms=pct(exact_ms, 50),
            exact_search_p95_ms=pct(exact_ms, 95),
        )
        default = graph.settings.graph_candidates
        for candidates in getattr(args, "sweep", []):
            graph.settings = replace(graph.settings, graph_candidates=candidates)
            try:
                swept, took = measure()
            finally:
                graph.settings = replace(graph.settings, graph_candidates=default)
            report.add(
                Row(
                    f"  same questions, the index asked for {candidates} candidates "
                    f"(setting graph_candidates; default {default}): recall@{K}, p50 / p95",
                    f"recall {swept:.3f}, {p50_p95(took)}",
                    f"default: recall {r:.3f}, {p50_p95(graph_ms)}",
                    f"{ratio(pct(took, 50), pct(graph_ms, 50)):.2f}× the default (p50)",
                ),
                **{
                    f"recall_at_10_c{candidates}": swept,
                    f"graph_search_c{candidates}_p50_ms": pct(took, 50),
                },
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.set_defaults(pg_url="")
    parser.add_argument(
        "--sweep",
        type=lambda text: [int(v) for v in text.split(",") if v],
        default=[],
        help="also measure these graph_candidates values, comma-separated (e.g. 400,800)",
    )
    args = parser.parse_args()
    report = Report()
    run(report, args)
    report.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
