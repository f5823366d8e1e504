"""How often a hit's excerpt shows the answer, with query-biased excerpts and without.

    python scripts/excerpt_choice.py VAULT FACTS [--json]

VAULT is a synced vault (``vault-ko sync``; the graph up), FACTS its hand-judged answering
facts (``tests/data/judged/*.facts.jsonl``: per question, sentences of notes a reader learns
the answer from, with their source file; or, for a vault whose text may not be copied into
the repository, ``tests/data/judged/tsc-meetings.answers.jsonl``: the ``lines`` of the
source file that hold each answering passage, first and last, read from VAULT). Every
question is answered twice in this process, as ``vault-ko query`` answers it (hybrid, the
default), with each hit's excerpt chosen for the question (``excerpts.py``) and with the
note's first paragraph. Over the first five hits of each answer that are the source file of
an answering passage, a hit "shows the answer" when its excerpt holds at least half of that
passage's first 25 content words. Ends with ``RESULT`` lines; exit 2 when an answer is
degraded (fallback hits are no measure of the semantic path's).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.app import App  # noqa: E402
from pipeline.bridge import STOP_WORDS  # noqa: E402
from pipeline.config import load_settings  # noqa: E402
from pipeline.kodb.text import fold  # noqa: E402
from pipeline.query import QueryOptions  # noqa: E402

SHOWN = 5
WORDS = 25
_WORD = re.compile(r"[^\W_]{3,}")


def content(text: str) -> list[str]:
    return [w for w in _WORD.findall(fold(text)) if w not in STOP_WORDS]


def shows(excerpt: str | None, sentence: str) -> bool:
    wanted = content(sentence)[:WORDS]
    if not excerpt or not wanted:
        return False
    held = set(content(excerpt))
    return sum(w in held for w in wanted) >= len(wanted) / 2


_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"<?https?://[^\s>]*>?")


def answering_text(vault: Path, fact: dict[str, Any]) -> str:
    """A judged answering passage: its sentence, or the lines of its note that hold it
    (links by their text, web addresses left out, as an excerpt shows them)."""
    if "object" in fact:
        return str(fact["object"])
    first, last = fact["lines"]
    lines = (vault / fact["source_file"]).read_text(encoding="utf-8").splitlines()
    return _URL.sub(" ", _LINK.sub(r"\1", " ".join(lines[first - 1 : last])))


def measure(vault: Path, facts: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in facts.read_text(encoding="utf-8").splitlines() if line]
    settings = load_settings(vault)
    counts = {"biased": 0, "summary": 0, "hits": 0, "questions": 0}
    changed: list[dict[str, str]] = []
    with App(settings) as app:
        pipeline = app.pipeline()
        base = QueryOptions.from_settings(settings)
        for row in rows:
            by_file: dict[str, list[str]] = {}
            for f in row["answering"]:
                by_file.setdefault(f["source_file"], []).append(answering_text(vault, f))
            answers = {
                key: pipeline.ask(row["question"], replace(base, excerpts=on))
                for key, on in (("biased", True), ("summary", False))
            }
            for a in answers.values():
                if a.mode != "semantic":
                    print(
                        f"excerpt_choice: a degraded answer: {a.degraded_reason}", file=sys.stderr
                    )
                    raise SystemExit(2)
            pairs = [
                (b, s)
                for b, s in zip(answers["biased"].hits, answers["summary"].hits, strict=True)
                if b.path in by_file
            ][:SHOWN]
            counts["questions"] += bool(pairs)
            for b, s in pairs:
                counts["hits"] += 1
                hit_b = any(shows(b.excerpt, x) for x in by_file[b.path])
                hit_s = any(shows(s.excerpt, x) for x in by_file[s.path])
                counts["biased"] += hit_b
                counts["summary"] += hit_s
                if hit_b != hit_s:
                    changed.append(
                        {"question": row["question"], "path": b.path, "better": str(hit_b)}
                    )
    return {**counts, "changed": changed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("facts", type=Path)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = measure(args.vault, args.facts)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for c in out["changed"]:
            mark = "+" if c["better"] == "True" else "-"
            print(f"{mark} {c['path']}: {c['question']}")
    n = out["hits"]
    print(
        f"RESULT answering_hits={n} questions={out['questions']} "
        f"shows_answer_biased={out['biased']} shows_answer_summary={out['summary']} "
        f"share_biased={out['biased'] / n if n else 0:.3f} "
        f"share_summary={out['summary'] / n if n else 0:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
