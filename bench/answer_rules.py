"""Which ordering rule makes the answer about the question: rules compared side by side.

Self-contained: for each judged vault (``examples/vault`` and ``tests/data/vaults/library``
with their question sets in ``tests/data/judged/``) it makes a temporary state dir, starts
its own local ArcadeDB on free ports, syncs the vault (read only), searches every judged
question once (the same hits for every rule), then answers each question under every rule
and scores the subjects against the judgements (``vault-ko eval --judged`` measures).

Rules (``rank.OrderRule`` and the bridge's mention evidence):

* ``band``: candidates of the same z-band are comparable (the answer label's bands);
* ``margin m``: of the same step of m·σ below the best hit's cosine;
* ``cosine``: only equal cosines (the seed's rule only breaks ties);
* ``seed only``: every candidate comparable (no relevance tier: what main did, with the
  corrected candidates);
* ``…, no mentions`` / ``mentions ≥ 3``: mentioned-only subjects left out / need 3 hits;
* ``…, no title match``: only the hit notes' own subjects and mentions.

Run: ``.venv/bin/python bench/answer_rules.py [--split tune|test|all]`` (about a minute;
the rule is chosen on ``tune``, reported on ``test``). Prints one markdown table per split
and ends with ``RESULT best_rule=… subject_ndcg=… note_ndcg=… top3=…`` (the chosen rule on
the chosen split, both vaults pooled).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline import bridge  # noqa: E402
from pipeline.config import load_settings  # noqa: E402
from pipeline.evaluate.judged import JudgedQuestion, read_judged  # noqa: E402
from pipeline.evaluate.metrics import answer_scores, first_occurrences  # noqa: E402
from pipeline.model import normalize_text  # noqa: E402
from pipeline.query import Pipeline, QueryOptions, Timer  # noqa: E402
from pipeline.rank import DEFAULT_ORDER, OrderRule  # noqa: E402
from pipeline.sync import sync_vault  # noqa: E402

VAULTS = (
    (
        "examples/vault",
        ROOT / "examples" / "vault",
        ROOT / "tests/data/judged/examples-vault.jsonl",
    ),
    ("library", ROOT / "tests/data/vaults/library", ROOT / "tests/data/judged/library.jsonl"),
)


@dataclass(frozen=True)
class Rule:
    name: str
    order: OrderRule | None  # None: every candidate comparable
    mention_min_hits: int | None = bridge.MENTION_MIN_HITS  # None: no mentioned subjects
    title_match: bool = True


RULES = (
    Rule("default", DEFAULT_ORDER),
    Rule("seed only (no relevance tier)", None),
    Rule("band", OrderRule("band", mentions="band")),
    Rule("margin 1.0σ", OrderRule("margin", 1.0)),
    Rule("margin 0.5σ", OrderRule("margin", 0.5)),
    Rule("margin 0.25σ", OrderRule("margin", 0.25)),
    Rule("margin 0.1σ", OrderRule("margin", 0.1)),
    Rule("cosine", OrderRule("cosine")),
    Rule("blend 0.25σ per 10× score", OrderRule("blend", blend_sigmas=0.25)),
    Rule("blend 0.5σ per 10× score", OrderRule("blend", blend_sigmas=0.5)),
    Rule("blend 1.0σ per 10× score", OrderRule("blend", blend_sigmas=1.0)),
    Rule("margin 0.25σ, mentions in their tier", OrderRule("margin", 0.25, "tier")),
    Rule("margin 0.25σ, mentions after their band", OrderRule("margin", 0.25, "band")),
    Rule("margin 0.25σ, no mentions", OrderRule("margin", 0.25), None),
    Rule("margin 0.25σ, mentions ≥ 3", OrderRule("margin", 0.25), 3),
    Rule("margin 0.25σ, no title match", OrderRule("margin", 0.25), title_match=False),
)


#: Degraded mode: which candidates are comparable, by their hit's word score against the
#: best hit's (a step of this share of it is one tier); 1.0 and more: one tier for all.
FALLBACK_STEPS = (0.05, 0.1, 0.25, 0.5, 1.01)


@dataclass(frozen=True)
class Asked:
    """One judged question and its hits (searched once for every rule)."""

    question: JudgedQuestion
    hits: list[Any]


class _Flat(OrderRule):
    """Every candidate in one tier: the seed's rule alone orders them."""

    def key(self, *args: Any) -> tuple[float, ...]:
        return (0.0,)


@contextmanager
def _applied(rule: Rule, p: Pipeline) -> Iterator[None]:
    saved = (bridge.MENTION_MIN_HITS, p.order, p.kodb.search_subjects_many)
    bridge.MENTION_MIN_HITS = rule.mention_min_hits or 10**6  # type: ignore[misc]
    p.order = rule.order or _Flat()
    if not rule.title_match:
        real = saved[2]

        def no_titles(terms: Any, limit: Any = None) -> dict[str, list[str]]:
            return {t: [] for t in terms} if limit is None else real(terms, limit)

        p.kodb.search_subjects_many = no_titles  # type: ignore[method-assign]
    try:
        yield
    finally:
        bridge.MENTION_MIN_HITS, p.order = saved[0], saved[1]  # type: ignore[misc]
        p.kodb.search_subjects_many = saved[2]  # type: ignore[method-assign]


def _score(p: Pipeline, asked: list[Asked], split: str, misses: bool = False) -> dict[str, float]:
    # The hits are the dense index's (``_ask``), so the answers are dense mode's.
    opts = QueryOptions.from_settings(p.settings, retrieval="dense")
    own = {path: normalize_text(n.subject or n.title) for path, n in p.kodb.notes().items()}
    noted = set(own.values())
    chosen = [a for a in asked if split == "all" or a.question.split == split]
    subjects, notes, s_qrels, n_qrels = [], [], [], []
    for a in chosen:
        answer = p.answer_from_hits(a.question.question, a.hits, opts, Timer())
        subjects.append(first_occurrences(normalize_text(s.subject) for s in answer.subjects))
        notes.append(first_occurrences(own[h.path] for h in answer.hits if h.path in own))
        s_qrels.append(a.question.relevant)
        n_qrels.append({s: g for s, g in a.question.relevant.items() if s in noted})
        if misses and not a.question.answers & set(subjects[-1][:3]):
            found = a.question.answers & set(notes[-1][:3])
            where = "in the top-3 notes" if found else "notes miss"
            print(f"MISS [{a.question.split}] {a.question.question!r} ({where})", file=sys.stderr)
            print(f"     answers:  {sorted(a.question.answers)}", file=sys.stderr)
            for s in answer.subjects[:4]:
                print(
                    f"     subject:  {s.subject!r} {s.evidence} {s.band} cos={s.best_cosine} "
                    f"score={s.score}",
                    file=sys.stderr,
                )
            print(f"     notes:    {list(notes[-1][:4])}", file=sys.stderr)
    return answer_scores(subjects, notes, s_qrels, n_qrels, answer_grade=2)


def _fallback_score(p: Pipeline, asked: list[Asked], split: str, step: float) -> dict[str, float]:
    """Answer quality in degraded mode with tiers of ``step`` of the best word score."""
    opts = QueryOptions.from_settings(p.settings, semantic=False)
    own = {path: normalize_text(n.subject or n.title) for path, n in p.kodb.notes().items()}
    noted = set(own.values())
    saved = p.order
    p.order = OrderRule(bm25_step=step)
    try:
        chosen = [a for a in asked if split == "all" or a.question.split == split]
        subjects, notes, s_qrels, n_qrels = [], [], [], []
        for a in chosen:
            answer = p.fallback_answer(a.question.question, opts, Timer(), "bench")
            subjects.append(first_occurrences(normalize_text(s.subject) for s in answer.subjects))
            notes.append(first_occurrences(own[h.path] for h in answer.hits if h.path in own))
            s_qrels.append(a.question.relevant)
            n_qrels.append({s: g for s, g in a.question.relevant.items() if s in noted})
        return answer_scores(subjects, notes, s_qrels, n_qrels, answer_grade=2)
    finally:
        p.order = saved


def _vault_runs(work: Path) -> Iterator[tuple[str, Pipeline, list[Asked]]]:
    from pipeline.app import App

    for name, folder, judged_file in VAULTS:
        state = work / name.replace("/", "-")
        base = load_settings(folder).replace(state_dir=state, kodb_url=None, graph_url=None)
        models = App(base)
        local = models.local_graph()
        embedder = models.load_model(before_stores=True)  # the graph is sized by the model
        local.up(dims=embedder.dims, settings=base)
        try:
            settings = local.settings_for(base)
            with App(settings, embedder=embedder) as app:
                p = app.pipeline(order=DEFAULT_ORDER)
                sync_vault(settings, app.kodb, app.graph, embedder, force_calibration=True)
                questions = read_judged(judged_file)
                vectors = embedder.embed([q.question for q in questions])
                asked = [
                    Asked(q, p.index_search(v, p.settings.query_hits))
                    for q, v in zip(questions, vectors, strict=True)
                ]
                yield name, p, asked
        finally:
            local.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("tune", "test", "all"), default=None)
    parser.add_argument(
        "--misses",
        metavar="RULE",
        help="print, on stderr, the questions whose answer is not in the top 3 under the "
        "rule of this name (e.g. 'default')",
    )
    args = parser.parse_args(argv)
    splits = [args.split] if args.split else ["tune", "test", "all"]
    table: dict[tuple[str, str, str], dict[str, float]] = {}
    fallback: dict[tuple[str, float, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="vault-ko-bench-rules-") as tmp:
        for name, p, asked in _vault_runs(Path(tmp)):
            for step in FALLBACK_STEPS:
                for split in splits:
                    fallback[(name, step, split)] = _fallback_score(p, asked, split, step)
            for rule in RULES:
                with _applied(rule, p):
                    for split in splits:
                        show = args.misses == rule.name and split == splits[-1]
                        table[(name, rule.name, split)] = _score(p, asked, split, show)
                        table[(name, rule.name, split)]["n"] = sum(
                            1 for a in asked if split == "all" or a.question.split == split
                        )
        shutil.rmtree(tmp, ignore_errors=True)
    names = [n for n, _, _ in VAULTS]
    pooled: dict[tuple[str, str], dict[str, float]] = {}
    for split in splits:
        print(f"\n### split: {split}\n")
        print(
            "| rule | "
            + " | ".join(f"{n}: subject nDCG@10 / note / top-3" for n in names)
            + " | pooled subject nDCG / ratio to notes / top-3 |"
        )
        print("|---|" + "---|" * (len(names) + 1))
        for rule in RULES:
            cells = []
            total = {"subject_ndcg@10": 0.0, "note_ndcg@10": 0.0, "top3_answer": 0.0, "n": 0}
            for n in names:
                r = table[(n, rule.name, split)]
                cells.append(
                    f"{r['subject_ndcg@10']:.3f} / {r['note_ndcg@10']:.3f} / {r['top3_answer']:.0%}"
                )
                for key in ("subject_ndcg@10", "note_ndcg@10", "top3_answer"):
                    total[key] += r[key] * r["n"]
                total["n"] += r["n"]
            avg = {k: v / total["n"] for k, v in total.items() if k != "n"}
            pooled[(rule.name, split)] = avg
            ratio = avg["subject_ndcg@10"] / avg["note_ndcg@10"] if avg["note_ndcg@10"] else 0
            print(
                f"| {rule.name} | "
                + " | ".join(cells)
                + f" | {avg['subject_ndcg@10']:.3f} / {ratio:.2f} / {avg['top3_answer']:.0%} |"
            )
    for split in splits:
        print(f"\n### degraded mode (full text), split: {split}\n")
        print(
            "| tier step (share of the best word score) | "
            + " | ".join(f"{n}: subject nDCG@10 / note / top-3" for n in names)
            + " |"
        )
        print("|---|" + "---|" * len(names))
        for step in FALLBACK_STEPS:
            label = "one tier (seed only)" if step > 1 else f"{step:g}"
            cells = []
            for n in names:
                r = fallback[(n, step, split)]
                cells.append(
                    f"{r['subject_ndcg@10']:.3f} / {r['note_ndcg@10']:.3f} / {r['top3_answer']:.0%}"
                )
            print(f"| {label} | " + " | ".join(cells) + " |")
    pick = "tune" if "tune" in splits else splits[0]
    best = max(RULES[1:], key=lambda r: _rank_key(pooled[(r.name, pick)]))
    report = splits[-1] if args.split is None else pick
    figures = pooled[(best.name, "test" if "test" in splits else report)]
    print(
        f"\nRESULT best_rule={best.name.replace(' ', '_')} chosen_on={pick} "
        f"subject_ndcg={figures['subject_ndcg@10']:.3f} note_ndcg={figures['note_ndcg@10']:.3f} "
        f"top3={figures['top3_answer']:.3f}"
    )
    return 0


#: The issue's bar: subject nDCG@10 at least this share of the note hits' nDCG@10.
NDCG_RATIO_TARGET = 0.95


def _rank_key(figures: dict[str, float]) -> tuple[bool, float, float]:
    """Rules that keep the subjects' nDCG within the target of the notes' first, then the
    answer in the top 3, then nDCG."""
    ratio = figures["subject_ndcg@10"] / figures["note_ndcg@10"] if figures["note_ndcg@10"] else 0
    return (ratio >= NDCG_RATIO_TARGET, figures["top3_answer"], figures["subject_ndcg@10"])


if __name__ == "__main__":
    raise SystemExit(main())
