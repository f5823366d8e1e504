"""Questions asking for the latest, measured (docs/time.md, "The latest"): how often the
first note of the answer is the newest note that answers the question, with the newest
first (``query_latest = "newest"``, the default) and in relevance order.

    python scripts/latest_first.py [--vault examples/vault] [--judged FILE.jsonl]

FILE.jsonl holds ``{"question", "newest"}`` rows: the vault path of the newest note that
answers each question (default: tests/data/judged/examples-vault-latest.jsonl). Asks every
question in this process with a fixed today (2026-06-15), against the vault's running
local graph (``vault-ko --vault VAULT graph up`` and ``sync`` first). Ends with ``RESULT``
lines; exit 2 on a degraded answer (the full-text order says nothing of the rule).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.app import App
from pipeline.config import load_settings
from pipeline.query import QueryOptions

ROOT = Path(__file__).resolve().parent.parent
JUDGED = ROOT / "tests/data/judged/examples-vault-latest.jsonl"
TODAY = "2026-06-15"


def run(vault: str, rows: list[dict[str, str]], order: str, verbose: bool) -> str | None:
    settings = load_settings(vault=vault).replace(query_latest=order, query_today=TODAY)
    first = ranked = 0
    with App(settings) as app:
        pipeline = app.pipeline()
        for row in rows:
            answer = pipeline.ask(row["question"], QueryOptions.from_settings(settings))
            if answer.mode != "semantic":
                print(
                    f"latest_first: a degraded answer ({answer.degraded_reason})", file=sys.stderr
                )
                return None
            paths = [h.path for h in answer.hits]
            first += bool(paths) and paths[0] == row["newest"]
            ranked += row["newest"] in paths[:5]
            if verbose:
                got = paths[0] if paths else "-"
                print(f"{order}: {row['question']!r}: first {got}", file=sys.stderr)
    n = len(rows)
    return (
        f"RESULT order={order} questions={n} first_is_newest={first / n:.3f} "
        f"newest_in_top5={ranked / n:.3f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", default=str(ROOT / "examples" / "vault"))
    parser.add_argument("--judged", type=Path, default=JUDGED)
    parser.add_argument("-v", "--verbose", action="store_true", help="Each answer's first note.")
    args = parser.parse_args()
    rows = [
        json.loads(line) for line in args.judged.read_text(encoding="utf-8").splitlines() if line
    ]
    for order in ("newest", "relevance"):
        line = run(args.vault, rows, order, args.verbose)
        if line is None:
            return 2
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
