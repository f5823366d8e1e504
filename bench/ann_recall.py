"""Recall and latency of the graph search path against exact numpy search, side by side.

Self-contained: starts its own local ArcadeDB (``pipeline.graph.local``) in a temporary state
dir on free ports, loads synthetic notes, measures, and stops the server at the end.

Data: CLUSTERED RANDOM vectors, not text embeddings. ``--clusters`` centres are drawn from a
standard normal; each note is a centre plus Gaussian noise (``--spread``), L2-normalised;
each query is a random centre plus the same noise. Clusters make near neighbours crowded,
which is what makes approximate indexes miss (uniform random vectors are too easy).

Measured per query, with k = 10:
* graph (over-fetch): ``GraphClient.vector_search`` as the pipeline runs it — fetch
  ``--candidates`` from the vector index with stored embeddings, re-score exactly, cut to k;
* graph (all candidates re-scored): the same, but every over-fetched candidate comes back
  with its embedding (what it costs to skip the index-score pre-selection);
* graph (no over-fetch): the same with candidates = k (the index's own top k);
* exact: numpy top-k over the full in-memory matrix of the stored float32 vectors.
recall@10 = |graph top-10 ∩ exact top-10| / 10, averaged over queries.

Run: ``.venv/bin/python bench/ann_recall.py`` (about 2 minutes: the load dominates).
The last line is ``RESULT recall@10=<x> graph_p50_ms=<x> exact_p50_ms=<x>``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pipeline.graph.backends.base as graph_backend  # noqa: E402
from pipeline.config import Settings  # noqa: E402
from pipeline.graph import GraphClient, GraphNote, LocalGraph  # noqa: E402

K = 10


def clustered(rng: np.random.Generator, centres: np.ndarray, n: int, spread: float) -> np.ndarray:
    """``n`` unit vectors around randomly chosen ``centres``."""
    picks = rng.integers(0, len(centres), size=n)
    vectors = centres[picks] + spread * rng.standard_normal((n, centres.shape[1]))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def exact_topk(matrix: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k rows of ``matrix`` nearest to ``query`` by cosine (rows are unit)."""
    scores = matrix @ (query / np.linalg.norm(query))
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top], kind="stable")]


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="notes to load")
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--spread", type=float, default=0.08, help="noise σ per dimension")
    parser.add_argument("--candidates", type=int, default=200, help="over-fetch of the index")
    parser.add_argument("--batch", type=int, default=1000, help="notes per upsert transaction")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    centres = rng.standard_normal((args.clusters, args.dims))
    vectors = clustered(rng, centres, args.n, args.spread)
    queries = clustered(rng, centres, args.queries, args.spread)
    paths = [f"bench/note-{i:06d}.md" for i in range(args.n)]

    with tempfile.TemporaryDirectory(prefix="vault-ko-bench-") as tmp:
        state = Path(tmp) / ".vault-ko"
        local = LocalGraph(state)
        settings = Settings(vault=Path(tmp), state_dir=state, graph_candidates=args.candidates)
        t0 = time.perf_counter()
        local.up(dims=args.dims, settings=settings)
        start_s = time.perf_counter() - t0
        try:
            cfg = local.settings_for(settings).replace(graph_retry_deadline=30.0)
            with GraphClient(cfg) as graph, GraphClient(cfg.replace(graph_candidates=K)) as bare:
                t0 = time.perf_counter()
                for lo in range(0, args.n, args.batch):
                    graph.upsert_notes(
                        [
                            GraphNote(
                                path=paths[i],
                                title=f"note {i}",
                                source_type="wiki",
                                content_hash=f"h{i}",
                                model="bench-clustered-random",
                                dims=args.dims,
                                embedded_at=0.0,
                                embedding=tuple(vectors[i].tolist()),
                            )
                            for i in range(lo, min(lo + args.batch, args.n))
                        ]
                    )
                load_s = time.perf_counter() - t0
                index = {p: i for i, p in enumerate(paths)}
                t0 = time.perf_counter()
                graph.vector_search(queries[0], K)  # the index graph is built on first use
                first_s = time.perf_counter() - t0
                bare.vector_search(queries[0], K)

                recall_over, recall_bare, recall_all = [], [], []
                graph_ms, bare_ms, exact_ms, all_ms = [], [], [], []
                pre_select = graph_backend.rescore_limit
                for query in queries:
                    t0 = time.perf_counter()
                    truth = set(exact_topk(vectors, query, K).tolist())
                    exact_ms.append((time.perf_counter() - t0) * 1e3)

                    t0 = time.perf_counter()
                    hits = graph.vector_search(query, K)
                    graph_ms.append((time.perf_counter() - t0) * 1e3)
                    recall_over.append(len(truth & {index[h.path] for h in hits}) / K)

                    t0 = time.perf_counter()
                    hits = bare.vector_search(query, K)
                    bare_ms.append((time.perf_counter() - t0) * 1e3)
                    recall_bare.append(len(truth & {index[h.path] for h in hits}) / K)

                    graph_backend.rescore_limit = lambda k: args.candidates
                    try:
                        t0 = time.perf_counter()
                        hits = graph.vector_search(query, K)
                        all_ms.append((time.perf_counter() - t0) * 1e3)
                    finally:
                        graph_backend.rescore_limit = pre_select
                    recall_all.append(len(truth & {index[h.path] for h in hits}) / K)
        finally:
            local.down()

    recall = statistics.fmean(recall_over)
    rows = [
        (f"graph, over-fetch {args.candidates} + exact re-score", recall, p50(graph_ms)),
        (
            f"graph, over-fetch {args.candidates}, all re-scored",
            statistics.fmean(recall_all),
            p50(all_ms),
        ),
        (f"graph, index top-{K} only (no over-fetch)", statistics.fmean(recall_bare), p50(bare_ms)),
        ("exact numpy over all vectors (in memory)", 1.0, p50(exact_ms)),
    ]
    print(
        f"\n{args.n} clustered random vectors × {args.dims} dims ({args.clusters} clusters, "
        f"spread {args.spread}), {args.queries} queries, k={K}, local ArcadeDB"
    )
    print(
        f"server start {start_s:.1f}s, load {load_s:.1f}s ({args.n / load_s:.0f} notes/s), "
        f"first search (builds the index graph) {first_s:.1f}s\n"
    )
    print(f"| {'search path':<48} | recall@{K} | p50 ms |")
    print(f"|{'-' * 50}|-----------|--------|")
    for name, rec, ms in rows:
        print(f"| {name:<48} | {rec:>9.3f} | {ms:>6.2f} |")
    print(
        f"\nRESULT recall@{K}={recall:.3f} graph_p50_ms={p50(graph_ms):.2f} "
        f"exact_p50_ms={p50(exact_ms):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
