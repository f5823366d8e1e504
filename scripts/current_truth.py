"""How current an answer's truth is (issue 37), from a ``scripts/judged_answers.py`` snapshot.

    python scripts/judged_answers.py OUT.json
    python scripts/current_truth.py OUT.json [--against BEFORE.json] [--json]

The questions and their expectations are ``tests/data/judged/examples-vault-current.jsonl``
and ``….expect.jsonl`` (written by reading the notes, before the feature); the other judged
sets of the snapshot are measured for nDCG and top-3 only (they must not fall). Per split
(tune / test / all), for each retrieval:

- ``current_first``: of the questions naming a current decision and one it replaced, the
  share whose answer holds every current decision (ADR) above every replaced one it holds
  (a current decision missing from the answer counts as a miss);
- ``in_window``: of the questions naming a period, the share whose notes are all dated
  within it or undated (and, when undated, marked: ``date`` null with the window applied);
- ``ndcg10`` and ``top3``: subject nDCG@10 and whether a grade-2 subject is in the top 3.

Ends with ``RESULT`` lines. Exit 2 when a snapshot lacks the set or holds a degraded answer.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JUDGED_DIR = ROOT / "tests/data/judged"
#: The snapshot's set names -> their judged files (judged_answers.SETS); a set with an
#: ``.expect.jsonl`` beside it is also measured for succession and periods.
SETS = ("examples-vault-current", "examples-vault", "library")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _ndcg(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    gains = [grades.get(s, 0) for s in ranked[:k]]
    dcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted(grades.values(), reverse=True)[:k]
    best = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best else 0.0


#: An ADR's subject starts with its number: the decisions among the expected current
#: subjects (the topic's wiki page may be expected above the old decision too, but the
#: succession rule is about decisions).
ADR_NAME = re.compile(r"^\d{4} ")


def _current_first(names: list[str], current: list[str], superseded: list[str]) -> bool:
    pos = {n: i for i, n in enumerate(names)}
    cur = [pos.get(c.casefold()) for c in current if ADR_NAME.match(c)]
    old = [pos.get(s.casefold()) for s in superseded]
    if any(p is None for p in cur):
        return False
    present = [p for p in old if p is not None]
    return all(c < o for c in cur for o in present)  # type: ignore[operator]


def _in_window(answer: dict[str, Any], window: dict[str, str]) -> bool:
    seen = answer.get("time_window")
    for hit in answer["hits"]:
        day = hit.get("date")
        if day is None:
            if not (seen and seen.get("applied")):
                return False  # an undated note is fine only when the answer marks it
            continue
        if not window["from"] <= day <= window["to"]:
            return False
    return True


def measure(name: str, answers: dict[str, Any]) -> dict[str, dict[str, Any]]:
    judged = {r["question"]: r for r in _rows(JUDGED_DIR / f"{name}.jsonl")}
    expect_file = JUDGED_DIR / f"{name}.expect.jsonl"
    blank = {"current": [], "superseded": [], "window": None}
    expect = (
        {r["question"]: r for r in _rows(expect_file)}
        if expect_file.exists()
        else dict.fromkeys(judged, blank)
    )
    out: dict[str, dict[str, Any]] = {}
    for retrieval, by_question in answers.items():
        tallies: dict[str, dict[str, list[float]]] = {}
        for question, answer in by_question.items():
            if answer["mode"] != "semantic":
                raise SystemExit(f"current_truth: a degraded answer: {question}")
            j, e = judged[question], expect[question]
            grades = {k.casefold(): v for k, v in j["relevant"].items()}
            names = [s["subject"].casefold() for s in answer["subjects"]]
            for split in (j.get("split") or "all", "all"):
                t = tallies.setdefault(split, {})
                t.setdefault("ndcg10", []).append(_ndcg(names, grades))
                top = any(grades.get(n, 0) >= 2 for n in names[:3])
                t.setdefault("top3", []).append(float(top))
                if e["current"] and e["superseded"]:
                    ok = _current_first(names, e["current"], e["superseded"])
                    t.setdefault("current_first", []).append(float(ok))
                if e.get("window"):
                    t.setdefault("in_window", []).append(float(_in_window(answer, e["window"])))
        for split, t in tallies.items():
            out[f"{retrieval}/{split}"] = {
                key: {"n": len(v), "share": round(sum(v) / len(v), 3)} for key, v in t.items()
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answers", type=Path)
    parser.add_argument("--against", type=Path, help="A snapshot to compare with (before).")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    runs = {"after": args.answers}
    if args.against:
        runs["before"] = args.against
    report: dict[str, Any] = {}
    for label, path in runs.items():
        data = json.loads(path.read_text())
        if SETS[0] not in data:
            print(f"current_truth: {path} has no {SETS[0]!r} answers", file=sys.stderr)
            return 2
        report[label] = {
            f"{name}/{key}": figures
            for name in SETS
            if name in data
            for key, figures in measure(name, data[name]).items()
        }
    if args.json:
        print(json.dumps(report, indent=2))
    for label, sets in report.items():
        for key, figures in sets.items():
            pairs = " ".join(f"{k}={v['share']}/{v['n']}" for k, v in figures.items())
            print(f"RESULT run={label} set={key} {pairs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
