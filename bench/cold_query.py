"""Cold questions as most people and agents ask them: a fresh process, no service.

Self-contained: copies ``examples/vault`` to a temporary folder, starts its own local
ArcadeDB there (free ports), runs `vault-ko sync` (which prepares the query-time model in
this run's own cache folder, so an earlier preparation is never what is timed), then
measures whole processes side by side, interleaved so the machine's drift hits both:

* cold: `vault-ko query --no-service --json` with the prepared model (``embed_runtime``
  auto) against the same question with ``VAULT_KO_EMBED_RUNTIME=torch`` (the torch path,
  what every cold question cost before): wall time and the child's peak memory;
* hook, cold: `vault-ko hook` with no service (each must inject a semantic answer);
* with `vault-ko serve` up: `vault-ko hook` and `vault-ko query` (unchanged targets), and
  the first hook after the service announced itself on its own (``hook_served_first_ms``);
* `vault-ko --help`.

Checks, each failing the run (exit 1) when false: the cold answers equal the torch path's
(mode, label, hits, subjects); every cold hook is semantic; a cold query imports none of
torch, transformers and sentence-transformers (one extra run under ``-X importtime``).
Targets (issue 33): cold query p50 ≤ 1.0 s and peak ≤ 300 MB; cold hook p95 ≤ 1.2 s;
served hook p95 < 300 ms; `--help` ≤ 0.2 s. Ends with ``RESULT key=value …`` lines.

Run: ``.venv/bin/python bench/cold_query.py`` (full: 15 runs each, about three minutes
here), ``--quick`` (3 runs each; CI). Also a part of bench/run.py (``--only cold``).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import Report, Row  # noqa: E402

QUESTIONS = (
    "why did we choose redis for the warm cache?",
    "how are kafka topics partitioned?",
    "what should the on-call engineer do at handover?",
    "how do we add a column to a big postgres table safely?",
    "what is the per-token request limit at the gateway?",
)
TORCH_MODULES = ("torch", "transformers", "sentence_transformers")
COLD_P50_S = 1.0
COLD_PEAK_MB = 300.0
HOOK_COLD_P95_S = 1.2
HOOK_SERVED_P95_MS = 300.0
HELP_S = 0.2


def exe() -> str:
    return str(Path(sys.executable).with_name("vault-ko"))


def child_env(cache: Path, **extra: str) -> dict[str, str]:
    """A user's environment: no VAULT_KO_* of ours, the model offline, this run's cache,
    and Python's bytecode cache allowed (a shell that sets PYTHONDONTWRITEBYTECODE makes an
    editable install compile its modules in every process; an installed wheel never does)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("VAULT_KO_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", XDG_CACHE_HOME=str(cache), **extra)
    return env


#: Starts the measured command from a small process and reports its own peak memory: a
#: child forked from this (large) process would count this process's pages as its own
#: until it execs, and ru_maxrss keeps that high-water mark.
LAUNCHER = """
import os, sys, time
t0 = time.perf_counter()
report, cmd = int(sys.argv[1]), sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.close(report)
    os.execvp(cmd[0], cmd)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
os.write(report, f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss} {wall}".encode())
"""


def run_measured(cmd: list[str], env: dict[str, str], stdin: str | None = None) -> dict[str, Any]:
    """One whole process: wall seconds (fork to exit, measured by the launcher), exit
    code, output, and its own peak memory (MB, ru_maxrss)."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(write_fd), *cmd],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    try:
        out, err = proc.communicate(stdin, timeout=300)
    finally:
        with os.fdopen(read_fd, "rb") as fh:
            report = fh.read().decode().split()
    if len(report) != 3:
        raise SystemExit(f"cold_query: the launcher reported nothing for {cmd}: {err[-500:]}")
    return {
        "wall": float(report[2]),
        "rc": int(report[0]),
        "peak_mb": int(report[1]) / 1024,
        "out": out,
        "err": err,
    }


def event(prompt: str) -> str:
    return json.dumps(
        {
            "session_id": "bench",
            "transcript_path": "/tmp/bench.jsonl",
            "cwd": "/tmp",
            "hook_event_name": "UserPromptSubmit",
            "prompt": prompt,
        }
    )


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def shape(answer: dict[str, Any]) -> tuple[Any, ...]:
    """What a reader sees of an answer, floats aside (they agree to 1e-5, see the tests)."""
    return (
        answer["mode"],
        answer["relevance"]["label"],
        tuple(h["path"] for h in answer["hits"]),
        tuple(s["subject"] for s in answer["subjects"]),
        tuple(tuple((f["predicate"], f["object"]) for f in s["facts"]) for s in answer["subjects"]),
    )


def imports_of(cmd: list[str], env: dict[str, str]) -> set[str]:
    code = f"import sys; sys.argv = {cmd!r}\nfrom pipeline.cli import main\nmain()"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def run(report: Report, args: argparse.Namespace, world: object | None = None) -> None:
    runs = args.cold_runs or (3 if args.quick else 15)
    torch_runs = max(2, runs // 3)
    tmp = Path(tempfile.mkdtemp(prefix="vault-ko-bench-cold-"))
    cache = tmp / "cache"
    vault = tmp / "vault"
    shutil.copytree(ROOT / "examples" / "vault", vault, ignore=shutil.ignore_patterns(".vault-ko"))
    base = [exe(), "--vault", str(vault)]
    env = child_env(cache)
    service: subprocess.Popen[str] | None = None
    try:
        for step in (["graph", "up"], ["sync", "--json"]):
            done = subprocess.run([*base, *step], capture_output=True, text=True, env=env)
            if done.returncode != 0:
                raise SystemExit(f"cold_query: `vault-ko {' '.join(step)}` failed: {done.stderr}")
        synced = json.loads(done.stdout)
        if not synced["query_model"]["ready"]:
            raise SystemExit(f"cold_query: sync did not prepare the model: {synced}")

        # One uncounted run of each: Python's bytecode cache, the page cache.
        run_measured([*base, "query", "--no-service", "--json", QUESTIONS[0]], env)
        run_measured([*base, "hook"], env, stdin=event(QUESTIONS[0]))
        cold: list[dict[str, Any]] = []
        torch: list[dict[str, Any]] = []
        hooks: list[dict[str, Any]] = []
        helps: list[float] = []
        same = True
        for i in range(runs):
            q = QUESTIONS[i % len(QUESTIONS)]
            query = [*base, "query", "--no-service", "--json", q]
            a = run_measured(query, env)
            cold.append(a)
            if i < torch_runs:  # the torch path: seconds each, so fewer runs
                b = run_measured(query, child_env(cache, VAULT_KO_EMBED_RUNTIME="torch"))
                torch.append(b)
                if a["rc"] or b["rc"]:
                    raise SystemExit(f"cold_query: a query failed: {a['err']}{b['err']}")
                same &= shape(json.loads(a["out"])) == shape(json.loads(b["out"]))
            hooks.append(run_measured([*base, "hook"], env, stdin=event(q)))
            helps.append(run_measured([exe(), "--help"], env)["wall"])
        modes = [json.loads(r["out"])["mode"] for r in cold]
        hook_semantic = sum(
            bool(h["out"].strip())
            and "degraded" not in json.loads(h["out"])["hookSpecificOutput"]["additionalContext"]
            for h in hooks
        )
        no_torch = not (
            imports_of([*base[1:], "query", "--no-service", QUESTIONS[0]], env) & set(TORCH_MODULES)
        )

        service = subprocess.Popen(
            [*base, "serve", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert service.stdout is not None
        ready, _, _ = select.select([service.stdout], [], [], 300)
        if not ready or not service.stdout.readline():
            raise SystemExit("cold_query: the service did not start")
        served_hooks = [
            run_measured([*base, "hook"], env, stdin=event(QUESTIONS[i % len(QUESTIONS)]))
            for i in range(max(runs, 10))
        ]
        served_queries = [
            run_measured([*base, "query", "--json", QUESTIONS[i % len(QUESTIONS)]], env)
            for i in range(runs)
        ]
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=60)
        subprocess.run([*base, "graph", "down"], capture_output=True, env=env)
        shutil.rmtree(tmp, ignore_errors=True)

    walls = [r["wall"] for r in cold]
    peaks = [r["peak_mb"] for r in cold]
    torch_walls = [r["wall"] for r in torch]
    torch_peaks = [r["peak_mb"] for r in torch]
    hook_walls = [r["wall"] for r in hooks]
    served_hook_ms = [r["wall"] * 1e3 for r in served_hooks]
    served_query = [r["wall"] for r in served_queries]
    f = {
        "cold_query_p50_s": statistics.median(walls),
        "cold_query_p95_s": pct(walls, 95),
        "cold_query_peak_mb": max(peaks),
        "cold_query_torch_p50_s": statistics.median(torch_walls),
        "cold_query_torch_peak_mb": max(torch_peaks),
        "hook_cold_p50_s": statistics.median(hook_walls),
        "hook_cold_p95_s": pct(hook_walls, 95),
        "hook_served_p95_ms": pct(served_hook_ms, 95),
        # The first prompt after the service announced itself: priming reads the warm
        # copies before that, so it should cost what the others do.
        "hook_served_first_ms": served_hook_ms[0],
        "query_served_p50_s": statistics.median(served_query),
        "help_p50_s": statistics.median(helps),
    }
    f["cold_speedup"] = f["cold_query_torch_p50_s"] / f["cold_query_p50_s"]
    semantic = modes.count("semantic") == len(modes)
    checks = {
        "cold_answers_identical": same,
        "cold_semantic_identical": semantic,
        "hook_cold_semantic_identical": hook_semantic == len(hooks),
        "cold_no_torch_identical": no_torch,
    }
    met = {
        "cold query p50": f["cold_query_p50_s"] <= COLD_P50_S,
        "cold query peak": f["cold_query_peak_mb"] <= COLD_PEAK_MB,
        "cold hook p95": f["hook_cold_p95_s"] <= HOOK_COLD_P95_S,
        "served hook p95": f["hook_served_p95_ms"] < HOOK_SERVED_P95_MS,
        "--help": f["help_p50_s"] <= HELP_S,
    }
    report.add(
        Row(
            f"cold `query --no-service` (examples/vault), {len(walls)} / {len(torch_walls)} runs",
            f"p50 {f['cold_query_p50_s']:.2f} s, p95 {f['cold_query_p95_s']:.2f} s, "
            f"peak {f['cold_query_peak_mb']:.0f} MB, no torch {str(no_torch).lower()}",
            f"torch path p50 {f['cold_query_torch_p50_s']:.2f} s, "
            f"peak {f['cold_query_torch_peak_mb']:.0f} MB",
            f"{f['cold_speedup']:.1f}x faster",
            f"target ≤ {COLD_P50_S} s, ≤ {COLD_PEAK_MB:.0f} MB: "
            f"{'met' if met['cold query p50'] and met['cold query peak'] else 'MISSED'}; "
            f"same answers {str(same).lower()}",
        ),
        **f,
        **checks,
    )
    report.add(
        Row(
            f"cold `hook` without a service, {len(hook_walls)} runs",
            f"p50 {f['hook_cold_p50_s']:.2f} s, p95 {f['hook_cold_p95_s']:.2f} s, "
            f"{hook_semantic} of {len(hooks)} semantic",
            f"with the service up: hook p95 {f['hook_served_p95_ms']:.0f} ms "
            f"(the first {f['hook_served_first_ms']:.0f} ms), "
            f"query p50 {f['query_served_p50_s']:.2f} s",
            "",
            f"targets cold p95 ≤ {HOOK_COLD_P95_S} s, served p95 < {HOOK_SERVED_P95_MS:.0f} ms: "
            f"{'met' if met['cold hook p95'] and met['served hook p95'] else 'MISSED'}",
        )
    )
    report.add(
        Row(
            "`vault-ko --help`",
            f"p50 {f['help_p50_s']:.2f} s",
            "",
            "",
            f"target ≤ {HELP_S} s: {'met' if met['--help'] else 'MISSED'}",
        ),
        cold_targets_met=all(met.values()),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(parser)
    parser.add_argument("--quick", action="store_true", help="3 runs of each (CI)")
    args = parser.parse_args()
    report = Report()
    run(report, args)
    report.print()
    failed = sorted(k for k, v in report.results.items() if k.endswith("_identical") and not v)
    if failed:
        print(f"FAILED checks: {', '.join(failed)}")
    return 1 if failed else 0


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cold-runs", type=int, help="cold runs of each command (15; quick 3)")


if __name__ == "__main__":
    sys.exit(main())
