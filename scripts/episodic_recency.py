"""Episodic recall's recency rule, measured (docs/time.md): the age of the three sessions
it returns and whether one of them is judged relevant, with the rule and without it.

    python scripts/episodic_recency.py [--vault examples/vault]

Asks every judged question of the vault that names no period with ``--preset episodic``
and a fixed today (2026-06-15), in this process, against the vault's running local graph
(``vault-ko --vault VAULT graph up`` and ``sync`` first). Ends with ``RESULT`` lines.
"""

from __future__ import annotations

import argparse
import json
import statistics
from datetime import date
from pathlib import Path

import pipeline.query as query
from pipeline.app import App
from pipeline.config import load_settings

ROOT = Path(__file__).resolve().parent.parent
JUDGED = ("examples-vault-current.jsonl", "examples-vault.jsonl")
TODAY = "2026-06-15"


def run(vault: str, rule: str) -> str:
    settings = load_settings(vault=vault)
    rows = [
        json.loads(line)
        for name in JUDGED
        for line in (ROOT / "tests/data/judged" / name).read_text(encoding="utf-8").splitlines()
        if line
    ]
    ages: list[int] = []
    relevant: list[bool] = []
    with App(settings) as app:
        pipeline = app.pipeline()
        for row in rows:
            opts = query.QueryOptions.from_settings(settings, preset="episodic", today=TODAY)
            answer = pipeline.ask(row["question"], opts)
            if answer.mode != "semantic":
                raise SystemExit(f"episodic_recency: a degraded answer ({answer.degraded_reason})")
            if answer.time_window is not None or not answer.hits:
                continue
            grades = {k.casefold(): v for k, v in row["relevant"].items()}
            today = date.fromisoformat(TODAY)
            ages += [(today - date.fromisoformat(h.date)).days for h in answer.hits if h.date]
            relevant.append(any(grades.get(h.title.casefold(), 0) >= 1 for h in answer.hits))
    return (
        f"RESULT rule={rule} questions={len(relevant)} median_age_days={statistics.median(ages)} "
        f"relevant_session_share={sum(relevant) / len(relevant):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", default=str(ROOT / "examples" / "vault"))
    args = parser.parse_args()
    print(run(args.vault, "recent-first"))
    query.recent_first = lambda hits, sigma: list(hits)  # the rule off: cosine order only
    print(run(args.vault, "cosine-only"))


if __name__ == "__main__":
    main()
