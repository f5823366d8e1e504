"""One question's embedding: the transformer in torch against ONNX Runtime, same model.

The warm service spends most of a question in one MiniLM forward on its single torch thread
(BENCHMARKS.md). In one process, alternating in rounds, the same short questions are
embedded by the pipeline's Embedder with ``runtime="torch"`` (the model's own modules
without ``encode()``'s bookkeeping) and with ``runtime="onnx"`` (pipeline/embed_onnx.py: the
exported transformer in ONNX Runtime, then the model's own pooling), each at ``--threads``
threads (1: the service's setting). It checks how close the vectors are (smallest cosine,
largest absolute difference) and that ONNX Runtime embeds the questions in one padded batch
and grouped by token length (load-context) bit for bit as one at a time.

Run: ``.venv/bin/python bench/onnx_forward.py [--threads 1] [--rounds 3] [--repeat 20]``
(``--quick``: one round, two passes; CI's smoke run); the last line is ``RESULT …``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pipeline.embed import Embedder, embed_prompts, onnx_runtime, resolve_model  # noqa: E402

#: Short questions of the kind agents send (the service's workload), asked in turn.
QUESTIONS = (
    "how do we invalidate the warm cache",
    "pgbouncer transaction mode pooling",
    "what happened in the search outage last week",
    "how are kafka topics partitioned across brokers",
    "sourdough bread hydration",
    "which database migration tool do we use and why",
    "who owns the billing service",
    "rollback plan for the payments deploy",
)


def p50_ms(fn: Callable[[str], Any], questions: list[str]) -> float:
    times = []
    for q in questions:
        t0 = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="threads per forward")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20, help="passes over the questions")
    parser.add_argument("--quick", action="store_true", help="one round of two passes")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.repeat = 1, 2
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    by_torch = Embedder(runtime="torch")
    source, model_id = resolve_model("all-MiniLM-L6-v2")
    t0 = time.perf_counter()
    onnx = onnx_runtime(by_torch._encoder, source, "onnx", device="cpu", name=model_id)
    ready_s = time.perf_counter() - t0  # export (first run only) and the check
    by_onnx = Embedder.from_encoder(by_torch._encoder, model_id=model_id, onnx=onnx)
    questions = list(QUESTIONS) * args.repeat
    for q in QUESTIONS:  # warm both (and torch's single-forward check)
        by_torch.embed_one(q), by_onnx.embed_one(q)
    torch_ms, onnx_ms = [], []
    for _ in range(args.rounds):
        torch_ms.append(p50_ms(by_torch.embed_one, questions))
        onnx_ms.append(p50_ms(by_onnx.embed_one, questions))
    ours = np.stack([by_onnx.embed_one(q) for q in QUESTIONS])
    theirs = np.stack([by_torch.embed_one(q) for q in QUESTIONS])
    cosine = float(np.min(np.sum(ours * theirs, axis=1)))
    diff = float(np.max(np.abs(ours - theirs)))
    grouped, _ = embed_prompts(by_onnx, list(QUESTIONS))
    invariant = bool(
        np.array_equal(grouped, ours) and np.array_equal(by_onnx.embed(list(QUESTIONS)), ours)
    )
    t, o = statistics.median(torch_ms), statistics.median(onnx_ms)
    print(
        f"one question at {args.threads} thread(s), p50 per round: torch "
        f"{' / '.join(f'{x:.2f}' for x in torch_ms)} ms; ONNX Runtime "
        f"{' / '.join(f'{x:.2f}' for x in onnx_ms)} ms; {t / o:.2f}x"
    )
    print(
        f"vectors: smallest cosine {cosine:.9f}, largest difference {diff:.2e}; "
        f"ONNX batches equal single questions bit for bit: {invariant}; "
        f"ONNX ready (export if not cached, check) in {ready_s:.1f} s"
    )
    print(
        f"RESULT threads={args.threads} torch_p50_ms={t:.2f} onnx_p50_ms={o:.2f} "
        f"speedup={t / o:.2f} min_cosine={cosine:.9f} max_abs_diff={diff:.2e} "
        f"onnx_batch_invariant={str(invariant).lower()} onnx_ready_s={ready_s:.1f}"
    )
    return 0 if invariant and diff < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
