"""The answer JSON of every judged question, as a user would get it, for before/after checks.

    python scripts/judged_answers.py OUT.json            # snapshot every judged set
    python scripts/judged_answers.py OUT.json --against BEFORE.json  # and compare

Each judged vault is copied to a temporary folder (its own state, KO-DB and local graph),
its local graph started and synced (``vault-ko graph up``, ``vault-ko sync``), and every
question is asked in a fresh process with ``vault-ko query --json --no-service`` (dense and,
with ``--retrieval hybrid``, hybrid), then the graph is stopped. Timings are dropped; every
other byte of the answer is kept, so a refactor that claims "behaviour unchanged" can be
held to it. A degraded answer fails the run: a fallback answer compared with a fallback
answer proves nothing about the flow.

Exit codes: 0 snapshot written (and identical to ``--against``), 1 answers differ,
2 a run failed or degraded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SETS = {
    "examples-vault": (
        ROOT / "examples" / "vault",
        ROOT / "tests/data/judged/examples-vault.jsonl",
    ),
    "library": (ROOT / "tests/data/vaults/library", ROOT / "tests/data/judged/library.jsonl"),
    "examples-vault-current": (
        ROOT / "examples" / "vault",
        ROOT / "tests/data/judged/examples-vault-current.jsonl",
    ),
}
#: A set's expectations (``<set>.expect.jsonl`` beside it): the day each question is asked
#: on (``--today``), for the sets whose questions name periods.
EXPECT_SUFFIX = ".expect.jsonl"
RETRIEVALS = ("dense", "hybrid")
VOLATILE = ("timings_ms",)


def _cli() -> list[str]:
    exe = Path(sys.executable).with_name("vault-ko")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeline.cli"]


def _run(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"judged_answers: {' '.join(args[1:4])} … exited {done.returncode}")
    return done.stdout


def _stable(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k not in VOLATILE}


def snapshot_set(name: str, vault: Path, judged: Path, env: dict[str, str]) -> dict[str, Any]:
    questions = [json.loads(line)["question"] for line in judged.read_text().splitlines() if line]
    expect = judged.with_name(judged.name.removesuffix(".jsonl") + EXPECT_SUFFIX)
    today: dict[str, str] = {}
    if expect.exists():
        rows = [json.loads(line) for line in expect.read_text().splitlines() if line]
        today = {r["question"]: r["today"] for r in rows if r.get("today")}
    with tempfile.TemporaryDirectory(prefix=f"judged-{name}-") as tmp:
        copy = Path(tmp) / "vault"
        shutil.copytree(vault, copy, ignore=shutil.ignore_patterns(".vault-ko"))
        base = [*_cli(), "--vault", str(copy)]
        try:
            _run([*base, "graph", "up"], env)
            _run([*base, "sync", "--json"], env)
            # An older vault-ko has no --today: it reads no time phrase anyway.
            dated = "--today" in _run([*base, "query", "--help"], env)
            answers: dict[str, Any] = {}
            for retrieval in RETRIEVALS:
                for q in questions:
                    day = ["--today", today[q]] if dated and q in today else []
                    out = _run(
                        [
                            *base,
                            "query",
                            q,
                            "--json",
                            "--no-service",
                            "--retrieval",
                            retrieval,
                            *day,
                        ],
                        env,
                    )
                    answer = json.loads(out)
                    if answer.get("mode") != "semantic":
                        raise SystemExit(
                            f"judged_answers: {name}/{retrieval} answered {answer.get('mode')!r} "
                            f"({answer.get('degraded_reason')}): nothing to compare"
                        )
                    answers.setdefault(retrieval, {})[q] = _stable(answer)
            return answers
        finally:
            subprocess.run([*base, "graph", "down"], env=env, capture_output=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--against", type=Path, help="an earlier snapshot to compare with")
    parser.add_argument("--only", choices=sorted(SETS), action="append")
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = {
        name: snapshot_set(name, vault, judged, env)
        for name, (vault, judged) in SETS.items()
        if not args.only or name in args.only
    }
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    count = sum(len(v) for s in result.values() for v in s.values())
    print(f"RESULT judged_answers={count} out={args.out}")
    if args.against is None:
        return 0
    before = json.loads(args.against.read_text())
    differ = [
        f"{name}/{retrieval}: {q}"
        for name, sets in result.items()
        for retrieval, answers in sets.items()
        for q, answer in answers.items()
        if before.get(name, {}).get(retrieval, {}).get(q) != answer
    ]
    for line in differ:
        print(f"differs: {line}")
    print(f"RESULT judged_identical={count - len(differ)} judged_differ={len(differ)}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
