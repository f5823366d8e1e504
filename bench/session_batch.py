"""Batch session loading vs a loop of single queries, side by side, on the corpus vault.

On the World (make_corpus.py's 20,000 notes and 1,000,000 facts by default, its own local
ArcadeDB loaded from the embedding cache; see harness.py), the same prompts are answered
twice with the same warm model:

* batch: ``pipeline.session.load_context`` (the in-process API of `vault-ko load-context`),
  writing ``packs.jsonl`` to a temp folder; ``--repeat`` runs (3), the median counts;
* loop: one ``Pipeline.ask`` per prompt, as `vault-ko query` runs it, for the first
  ``--loop-prompts`` (200) of them: per-prompt times are compared.

Prompts (``--prompts``, default 1000) are generated from the vault's note titles and KO-DB
subjects with question templates, plus off-topic questions, plus prompts of 2–9 words drawn
at random from the titles' and subjects' words (what an agent's session notes look like to
the bridge: many weak hits and many candidate subjects), shuffled with a fixed seed.
identical = every pack of every batch run among the looped prompts, read back from
packs.jsonl, equals ``to_dict`` of the single answer, ``timings_ms`` ignored.

Run: ``.venv/bin/python bench/session_batch.py [--quick]``. The last line is
``RESULT …``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness import Report, Row, World, add_common_args, log, world_or

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
    """``n`` prompts: about 1/2 questions about the vault, 1/4 random words of it, 1/4
    off-topic, deterministic for a seed."""
    rng = random.Random(seed)
    topics = sorted(set(titles) | set(subjects))
    words = sorted({w for t in topics for w in t.lower().split() if len(w) >= 4 and w.isalpha()})
    prompts: list[str] = []
    while len(prompts) < n:
        draw = rng.random()
        if draw < 0.25 and words:
            prompts.append(" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))))
        elif draw < 0.5:
            base = rng.choice(OFF_TOPIC)
            prompts.append(base if rng.random() < 0.5 else f"{base} {rng.randint(1, 99)}")
        else:
            prompts.append(rng.choice(ON_TOPIC).format(x=rng.choice(topics)))
    return prompts


def strip_timings(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "timings_ms"}


def run(report: Report, args: argparse.Namespace, world: World | None = None) -> None:
    from make_corpus import HUBS

    from pipeline.embed import batch_invariant
    from pipeline.render import to_dict
    from pipeline.session import load_context

    repeat = getattr(args, "repeat", 3)
    with world_or(world, args) as w, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        p = w.app.pipeline()
        titles = [n.title for n in p.kodb.notes().values()]
        prompts = make_prompts(titles, list(HUBS), w.size["prompts"], 7)
        # Single queries cost ~50× a batched prompt: the loop answers the first
        # `loop_prompts` of them (per-prompt times are compared, packs checked on those).
        looped = prompts[: w.size["loop_prompts"]]
        p.ask("warm up the model, the driver and the database")  # same warm start for both

        # The batch is short, so a burst of other work on the machine can double it:
        # it runs `repeat` times (fresh output each time) and the median counts.
        batch_runs: list[float] = []
        for run_no in range(repeat):
            out = tmp / f"packs-{run_no}"
            t = time.perf_counter()
            summary = load_context(p, prompts, out)
            batch_runs.append(time.perf_counter() - t)
        batch_s = statistics.median(batch_runs)

        t = time.perf_counter()
        singles = [p.ask(text) for text in looped]
        loop_s = time.perf_counter() - t

        wanted = [strip_timings(to_dict(answer)) for answer in singles]
        mismatches: set[int] = set()
        for run_no in range(repeat):
            text = (tmp / f"packs-{run_no}" / "packs.jsonl").read_text("utf-8")
            packs = [json.loads(line) for line in text.splitlines()]
            if len(packs) != len(prompts):
                mismatches.add(-1)
            packs = packs[: len(looped)]
            for i, (pack, want) in enumerate(zip(packs, wanted, strict=False)):
                got = strip_timings({k: v for k, v in pack.items() if k not in ("id", "prompt")})
                if got != want or pack["id"] != str(i + 1) or pack["prompt"] != prompts[i]:
                    mismatches.add(i + 1)
        identical = len(singles) == len(looped) and not mismatches
        if mismatches:
            log(f"load-context: {len(mismatches)} packs differ, e.g. {sorted(mismatches)[:10]}")
        n = len(prompts)
        per_batch = batch_s / n
        per_single = loop_s / len(looped)
        speedup = per_single / per_batch if per_batch else float("inf")
        log(
            f"load-context: labels {summary.labels}, modes {summary.modes}, search "
            f"{summary.search_path}, {summary.embed_batches} embed batches, "
            f"{summary.kodb_statements} KO-DB statements; batch-invariant {batch_invariant()}"
        )
        report.add(
            Row(
                f"`load-context` of {n:,} prompts, {len(titles):,} notes ({w.graph_notes:,} in the "
                f"graph), median of {repeat}",
                f"{batch_s:.2f} s ({batch_s / n * 1e3:.1f} ms/prompt, "
                f"search {summary.search_path})",
                f"single `Pipeline.ask` of the first {len(looped):,}: {loop_s:.1f} s "
                f"({per_single * 1e3:.1f} ms/prompt)",
                f"{speedup:.1f}× faster per prompt",
                "identical packs" if identical else f"**{len(mismatches)} packs differ**",
            ),
            load_context_speedup=speedup,
            load_context_identical=identical,
            load_context_prompts_per_s=n / batch_s,
            load_context_resident_facts=summary.resident_facts,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--prompts", type=int)
    parser.add_argument("--loop-prompts", type=int, help="of them, also answered one by one")
    parser.add_argument("--repeat", type=int, default=3, help="batch runs; the median counts")
    args = parser.parse_args()
    report = Report()
    run(report, args)
    report.print()
    return 0 if report.results.get("load_context_identical") else 1


if __name__ == "__main__":
    sys.exit(main())
