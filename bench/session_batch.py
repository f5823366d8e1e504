"""Batch session loading vs a loop of single queries, on the sample vault, side by side.

Self-contained: copies ``examples/vault`` to a temporary folder, starts its own local
ArcadeDB there (``pipeline.graph.local``, free ports), syncs the vault (ingest, embed,
calibrate), then answers the same prompts twice with the same warm model:

* batch: ``pipeline.session.load_context`` (the in-process API of `vault-ko load-context`),
  writing ``packs.jsonl`` to the temp folder; ``--repeat`` runs (3), the median counts;
* loop: one ``Pipeline.ask`` per prompt, as `vault-ko query` runs it.

Prompts (``--prompts``, default 1000) are generated from the vault's note titles and KO-DB
subjects with question templates, plus off-topic questions, shuffled with a fixed seed.
identical = every pack of every batch run, read back from packs.jsonl, equals
``answer_to_dict`` of the single answer, ``timings_ms`` ignored. The server is stopped and
the temp folder removed at the end.

Run: ``.venv/bin/python bench/session_batch.py`` (about a minute). The last line is
``RESULT speedup=<x> identical=<true|false>``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# MKL's strict mode (batch-invariant embeddings) is set by pipeline.embed before it imports
# torch, whatever the order of these imports.
from pipeline.config import load_settings  # noqa: E402
from pipeline.embed import batch_invariant  # noqa: E402
from pipeline.graph.local import LocalGraph  # noqa: E402
from pipeline.query import Pipeline  # noqa: E402
from pipeline.render import answer_to_dict  # noqa: E402
from pipeline.session import load_context  # noqa: E402
from pipeline.sync import sync_vault  # noqa: E402

ON_TOPIC = (
    "what does the vault know about {x}?",
    "why did we decide on {x}?",
    "{x}",
    "how does {x} work in our platform?",
    "what are the open questions about {x}",
    "summarise the history of {x} for a new teammate",
)
OFF_TOPIC = (
    "recipe for banana bread with walnuts",
    "how tall is the eiffel tower",
    "best hiking trails in patagonia",
    "who won the 1998 football world cup",
    "how do i knit a scarf for beginners",
    "what is the airspeed velocity of an unladen swallow",
    "tips for growing tomatoes on a balcony",
    "explain the rules of cricket",
    "mi a legjobb gulyásleves recept?",
    "how many moons does jupiter have",
    "translate good morning into japanese",
    "what should I pack for a week in iceland",
)


def make_prompts(titles: list[str], subjects: list[str], n: int, seed: int) -> list[str]:
    """``n`` prompts: about 3/4 about the vault, 1/4 off-topic, deterministic for a seed."""
    rng = random.Random(seed)
    topics = sorted(set(titles) | set(subjects))
    prompts: list[str] = []
    while len(prompts) < n:
        if rng.random() < 0.25:
            base = rng.choice(OFF_TOPIC)
            prompts.append(base if rng.random() < 0.5 else f"{base} {rng.randint(1, 99)}")
        else:
            prompts.append(rng.choice(ON_TOPIC).format(x=rng.choice(topics)))
    return prompts


def strip_timings(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "timings_ms"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--search", choices=["auto", "exact", "index"], default="auto")
    parser.add_argument("--repeat", type=int, default=3, help="batch runs; the median counts")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="vault-ko-session-bench-"))
    vault = tmp / "vault"
    shutil.copytree(ROOT / "examples" / "vault", vault, ignore=shutil.ignore_patterns(".vault-ko"))
    base = load_settings(vault, env={})
    local = LocalGraph(base.state_dir)
    try:
        t = time.perf_counter()
        local.up(settings=base)
        print(f"graph up in {time.perf_counter() - t:.1f} s", flush=True)
        settings = local.settings_for(base)
        with Pipeline(settings) as p:
            t = time.perf_counter()
            sync_vault(p.settings, p.kodb, p.graph, p.embedder)
            print(f"sync in {time.perf_counter() - t:.1f} s", flush=True)
            titles = [n.title for n in p.kodb.notes().values()]
            subjects = sorted(
                {f.subject for f in p.kodb.facts_for_subjects(p.kodb.subject_norms())}
            )
            prompts = make_prompts(titles, subjects, args.prompts, args.seed)
            p.ask("warm up the model, the driver and the database")  # same warm start for both

            # The batch is short, so a burst of other work on the machine can double it:
            # it runs --repeat times (fresh output each time) and the median counts.
            batch_runs: list[float] = []
            for run in range(args.repeat):
                out = tmp / f"packs-{run}"
                t = time.perf_counter()
                report = load_context(
                    p, prompts, out, search=args.search, chunk_size=args.chunk_size
                )
                batch_runs.append(time.perf_counter() - t)
            batch_s = statistics.median(batch_runs)

            t = time.perf_counter()
            singles = [p.ask(text) for text in prompts]
            loop_s = time.perf_counter() - t

        wanted = [strip_timings(answer_to_dict(answer)) for answer in singles]
        mismatches: set[int] = set()
        for run in range(args.repeat):
            text = (tmp / f"packs-{run}" / "packs.jsonl").read_text("utf-8")
            packs = [json.loads(line) for line in text.splitlines()]
            if len(packs) != len(prompts):
                mismatches.add(-1)
            for i, (pack, want) in enumerate(zip(packs, wanted, strict=False)):
                got = strip_timings({k: v for k, v in pack.items() if k not in ("id", "prompt")})
                if got != want or pack["id"] != str(i + 1) or pack["prompt"] != prompts[i]:
                    mismatches.add(i + 1)
        identical = len(singles) == len(prompts) and not mismatches

        n = len(prompts)
        print(f"prompts {n} ({report.labels}, {report.modes})")
        runs = ", ".join(f"{r:.2f}" for r in batch_runs)
        print(
            f"batch  load_context: {batch_s:.2f} s median of [{runs}] "
            f"({batch_s / n * 1e3:.2f} ms/prompt; search "
            f"{report.search_path}, {report.embed_batches} embed batches, "
            f"{report.kodb_statements} KO-DB statements)"
        )
        print(f"loop   Pipeline.ask: {loop_s:.2f} s ({loop_s / n * 1e3:.2f} ms/prompt)")
        if mismatches:
            print(
                f"packs differing from single answers: {len(mismatches)}, "
                f"e.g. ids {sorted(mismatches)[:10]}"
            )
        print(f"batch-invariant embedding: {batch_invariant()}")
        speedup = loop_s / batch_s if batch_s else float("inf")
        print(f"RESULT speedup={speedup:.1f} identical={'true' if identical else 'false'}")
        return 0 if identical else 1
    finally:
        local.down()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
