"""How often the facts an answer shows under a subject answer the question (issue 36).

    python scripts/fact_choice.py ANSWERS.json [--against BEFORE.json] [--json]

ANSWERS.json is a snapshot of ``scripts/judged_answers.py`` (every judged question asked
as a user would, in a fresh process). The labels are ``tests/data/judged/*.facts.jsonl``:
for each question, the facts of its answering (grade 2) subjects that a person reading
them learns the answer from, judged by hand fact by fact, whatever their predicate. For
each answering subject in the answer, a hit is "an answering fact is among the facts
shown under it"; reported over the subjects in the text answer's first five and over all
of the answer's subjects (top-k), and per question (any answering fact under the first
five subjects). Questions whose answering subjects state no answering fact are left out
(the answer lies only in a note's body). Dense answers; ``--retrieval hybrid`` too.

Ends with ``RESULT`` lines; exit 2 when a snapshot is missing a set or holds a degraded
answer (a fallback answer's facts say nothing about the semantic path).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LABELS = {
    "examples-vault": ROOT / "tests/data/judged/examples-vault.facts.jsonl",
    "library": ROOT / "tests/data/judged/library.facts.jsonl",
}
JUDGED = {
    "examples-vault": ROOT / "tests/data/judged/examples-vault.jsonl",
    "library": ROOT / "tests/data/judged/library.jsonl",
}
TEXT_SUBJECTS = 5


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _fact_id(f: dict[str, Any]) -> tuple[str, str, str]:
    return (f["predicate"], f["object"], f["source_file"])


def measure(answers: dict[str, Any], name: str, retrieval: str) -> dict[str, Any]:
    labels = {row["question"]: row["answering"] for row in _lines(LABELS[name])}
    grades = {row["question"]: row["relevant"] for row in _lines(JUDGED[name])}
    top5 = [0, 0]
    topk = [0, 0]
    questions = [0, 0]
    for answer in answers[name][retrieval].values():
        if answer["mode"] != "semantic":
            raise SystemExit(
                f"fact_choice: {name} {retrieval}: a degraded answer ({answer['query']})"
            )
        answering = labels.get(answer["query"]) or []
        if not answering:
            continue
        by_subject: dict[str, set[tuple[str, str, str]]] = {}
        for f in answering:
            by_subject.setdefault(f["subject"].casefold(), set()).add(_fact_id(f))
        found_in_top5 = False
        for rank, s in enumerate(answer["subjects"]):
            wanted = by_subject.get(s["subject"].casefold())
            if wanted is None:
                continue
            hit = any(_fact_id(f) in wanted for f in s["facts"])
            topk[0] += 1
            topk[1] += hit
            if rank < TEXT_SUBJECTS:
                top5[0] += 1
                top5[1] += hit
                found_in_top5 |= hit
        graded = any(g == 2 for g in grades[answer["query"]].values())
        if graded:
            questions[0] += 1
            questions[1] += found_in_top5

    def share(pair: list[int]) -> float | None:
        return round(pair[1] / pair[0], 3) if pair[0] else None

    return {
        "subjects_top5": top5[0],
        "answering_top5": share(top5),
        "subjects_topk": topk[0],
        "answering_topk": share(topk),
        "questions": questions[0],
        "questions_answered_top5": share(questions),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path)
    parser.add_argument("--against", type=Path, help="A snapshot to compare with (before).")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args(argv)
    snapshots = {"after": json.loads(args.answers.read_text())}
    if args.against:
        snapshots["before"] = json.loads(args.against.read_text())
    report: dict[str, Any] = {}
    for label, answers in snapshots.items():
        for name in LABELS:
            if name not in answers:
                print(f"fact_choice: {label} snapshot has no {name!r} answers", file=sys.stderr)
                return 2
            for retrieval in answers[name]:
                report[f"{label}/{name}/{retrieval}"] = measure(answers, name, retrieval)
    if args.json:
        print(json.dumps(report, indent=2))
    for key, figures in report.items():
        pairs = " ".join(f"{k}={v}" for k, v in figures.items())
        print(f"RESULT set={key} {pairs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
