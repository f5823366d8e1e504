"""What the benchmark parts share: rows of the one table, percentiles, and the World.

The World is the 20,000-note vault of ``make_corpus.py`` made live in a temporary folder:
ingested into a SQLite KO-DB (and a scratch PostgreSQL database when a server URL is
given), the facts file imported with ``vault-ko facts import`` in a child process (its
wall time and peak memory measured), its own local ArcadeDB on free ports, and the graph
loaded with the corpus's cached embeddings. Everything is stopped and removed on exit.
Each part takes a World; run alone, a part builds the one it needs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for p in (str(ROOT), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from make_corpus import CachedEmbedder, Corpus, ensure_corpus  # noqa: E402

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"

#: Sizes of the full run and of --quick (CI: the code must not rot, the figures do not count).
FULL = {
    "notes": 20_000,
    "facts": 1_000_000,
    "queries": 30,
    "prompts": 1000,
    "loop_prompts": 100,
    "embed_notes": 150,
}
QUICK = {
    "notes": 200,
    "facts": 13_000,
    "queries": 6,
    "prompts": 12,
    "loop_prompts": 12,
    "embed_notes": 10,
}


@dataclass(frozen=True)
class Row:
    """One row of the table: a measurement and what it is compared with, same run."""

    what: str
    measured: str
    against: str = ""
    ratio: str = ""
    check: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)

    def add(self, row: Row, **results: Any) -> None:
        self.rows.append(row)
        self.results.update(results)
        print(
            f"  row: {row.what}: {row.measured} | {row.against} | {row.ratio} | {row.check}",
            flush=True,
        )

    def table(self) -> str:
        head = "| measurement | measured | compared with (same run) | ratio | check |"
        lines = [head, "|---|---|---|---|---|"]
        for r in self.rows:
            lines.append(f"| {r.what} | {r.measured} | {r.against} | {r.ratio} | {r.check} |")
        return "\n".join(lines)

    def result_lines(self, per_line: int = 8) -> list[str]:
        items = [f"{k}={_fmt(v)}" for k, v in self.results.items()]
        return [
            "RESULT " + " ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)
        ]

    def print(self) -> None:
        print()
        print(self.table())
        print()
        for line in self.result_lines():
            print(line)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1 else f"{v:.2f}"
    return str(v)


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile by nearest rank (values as given, e.g. ms)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def p50_p95(values: Sequence[float]) -> str:
    return f"{pct(values, 50):.2f} / {pct(values, 95):.2f} ms"


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def timed_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def cli() -> str:
    return str(Path(sys.executable).with_name("vault-ko"))


def child_env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_KO_")}
    out.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return out


#: A small launcher that forks the command and reports its ``ru_maxrss`` on the fd it is
#: given. Linux records the parent's memory in a child's ``ru_maxrss`` when the child execs
#: (the old address space's high-water mark is kept), so a child spawned straight from this
#: process (which holds the corpus, about 1 GB) reports at least that; forked from the
#: launcher, it starts from the launcher's few MB.
_MAXRSS_LAUNCHER = """
import os, sys
fd = int(sys.argv[1])
pid = os.fork()
if pid == 0:
    os.close(fd)
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
os.write(fd, str(usage.ru_maxrss).encode())
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Run a child to its end: (seconds, its peak RSS in MB, stdout). Raises on failure.

    The peak is the child's own ``ru_maxrss`` from ``os.wait4`` in a small launcher
    (``_MAXRSS_LAUNCHER`` says why not from this process)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        read_fd, write_fd = os.pipe()
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _MAXRSS_LAUNCHER, str(write_fd), *cmd],
                env=env,
                stdout=out,
                stderr=err,
                text=True,
                pass_fds=(write_fd,),
            )
        finally:
            os.close(write_fd)
        with os.fdopen(read_fd, "rb") as report:
            maxrss = report.read()
        proc.wait()
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0 or not maxrss:
            raise SystemExit(f"{' '.join(cmd[:6])}… exited {proc.returncode}: {err.read()[-2000:]}")
        return seconds, int(maxrss) // 1024, out.read()


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="CI sizes (a smoke run)")
    parser.add_argument("--notes", type=int, help="vault notes (default 20000; quick 200)")
    parser.add_argument("--facts", type=int, help="facts rows (default 1000000; quick 13000)")
    parser.add_argument("--seed", type=int, default=14, help="corpus seed")
    parser.add_argument(
        "--graph-notes",
        choices=("all", "cached"),
        default="all",
        help="the graph holds every note (all), or only those the embedding cache holds",
    )
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(
            "VAULT_KO_BENCH_PG_URL", os.environ.get("VAULT_KO_TEST_PG_URL", DEFAULT_PG_URL)
        ),
        help="PostgreSQL server for scratch databases ('' to skip PostgreSQL)",
    )


def sizes(args: argparse.Namespace) -> dict[str, int]:
    base = dict(QUICK if args.quick else FULL)
    for key in FULL:
        value = getattr(args, key, None)
        if value:
            base[key] = value
    return base


def load_real_embedder(settings: Any) -> Any:
    from pipeline.embed import Embedder

    return Embedder(settings.embed_model, batch_size=settings.embed_batch_size)


class World:
    """The corpus vault, live: KO-DBs, graph, model (see the module docstring)."""

    def __init__(self, args: argparse.Namespace, *, graph: bool = True, facts: bool = True):
        self.args = args
        self.size = sizes(args)
        self.want_graph = graph
        self.want_facts = facts
        self.corpus: Corpus = ensure_corpus(self.size["notes"], self.size["facts"], args.seed)
        self.measures: dict[str, float] = {}
        self._stack = contextlib.ExitStack()
        self.pg_url: str | None = None
        self.pg_settings: Any = None
        self.app: Any = None
        self.pg_app: Any = None
        self.local: Any = None
        self.embedder: Any = None

    # -- building ------------------------------------------------------------------------
    def __enter__(self) -> World:
        try:
            self._build()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _build(self) -> None:
        from pipeline.app import App
        from pipeline.config import load_settings
        from pipeline.ingest import ingest_vault
        from pipeline.kodb import KoDB, scratch_database

        tmp = Path(tempfile.mkdtemp(prefix="vault-ko-bench-"))
        self._stack.callback(shutil.rmtree, tmp, True)
        self.tmp = tmp
        self.vault = tmp / "vault"
        t0 = time.perf_counter()
        shutil.copytree(self.corpus.vault, self.vault)
        log(
            f"world: vault of {self.size['notes']} notes copied in {time.perf_counter() - t0:.1f} s"
        )
        # The corpus cache holds one vector a note (bench/make_corpus.py --embed): the World
        # embeds long notes by their head, and the passage index stays empty (a search still
        # asks it). What passages cost and buy is measured by `vault-ko eval` and
        # scripts/long_notes.py (docs/long-notes.md).
        self.settings = load_settings(self.vault, env={}).replace(embed_long_notes="head")
        facts_file = self.corpus.facts_file()

        with KoDB.open(self.settings.effective_kodb_url) as kodb:
            report = ingest_vault(self.settings, kodb)
        self.measures["ingest_sqlite_s"] = report.seconds
        self.measures["ingest_notes"] = report.notes_total
        log(f"world: ingest (SQLite) {report.notes_total} notes in {report.seconds:.1f} s")
        if self.want_facts:
            seconds, peak_mb, _ = run_measured(
                [cli(), "--vault", str(self.vault), "facts", "import", str(facts_file), "--json"],
                child_env(),
            )
            self.measures["import_sqlite_s"] = seconds
            self.measures["import_sqlite_peak_mb"] = peak_mb
            log(f"world: facts import (SQLite) {self.size['facts']} rows in {seconds:.1f} s")

        if self.args.pg_url:
            self.pg_url = self._stack.enter_context(
                scratch_database(self.args.pg_url, "vaultko_bench")
            )
            self.pg_settings = self.settings.replace(kodb_url=self.pg_url)
            with KoDB.open(self.pg_url) as kodb:
                report = ingest_vault(self.pg_settings, kodb)
            self.measures["ingest_pg_s"] = report.seconds
            log(f"world: ingest (PostgreSQL) in {report.seconds:.1f} s")
            if self.want_facts:
                seconds, peak_mb, _ = run_measured(
                    [
                        cli(),
                        "--vault",
                        str(self.vault),
                        "facts",
                        "import",
                        str(facts_file),
                        "--json",
                    ],
                    child_env(VAULT_KO_KODB_URL=self.pg_url),
                )
                self.measures["import_pg_s"] = seconds
                self.measures["import_pg_peak_mb"] = peak_mb
                log(f"world: facts import (PostgreSQL) in {seconds:.1f} s")

        if not self.want_graph:
            return
        from pipeline.graph.local import LocalGraph

        self.local = LocalGraph(self.settings.state_dir)
        self._stack.callback(self.local.down)
        t0 = time.perf_counter()
        self.local.up(dims=384, settings=self.settings)
        log(f"world: graph up in {time.perf_counter() - t0:.1f} s")
        self.settings = self.local.settings_for(self.settings)
        if self.pg_settings is not None:
            self.pg_settings = self.local.settings_for(self.pg_settings)
        self.embedder = load_real_embedder(self.settings)
        self.app = self._stack.enter_context(App(self.settings, embedder=self.embedder))
        cached = CachedEmbedder(self.corpus, self.embedder)
        self.cached = cached
        self.graph_paths = self._graph_paths(cached)
        t0 = time.perf_counter()
        report = self.sync(cached)
        cached.save()
        self.measures["graph_load_s"] = time.perf_counter() - t0
        self.graph_notes = len(self.app.graph.note_states())
        log(
            f"world: graph loaded ({report.embedded} notes, {cached.misses} embedded now, "
            f"the rest from the cache) in {self.measures['graph_load_s']:.1f} s"
        )
        if self.pg_settings is not None:
            self.pg_app = self._stack.enter_context(
                App(self.pg_settings, graph=self.app.graph, embedder=self.embedder)
            )
            # The calibration lives in KO-DB: measure it for the PostgreSQL one too.
            from pipeline.calibrate import calibrate_vault

            calibrate_vault(
                self.pg_app.kodb,
                self.app.graph,
                cached,
                max_pairs=self.settings.calibration_max_pairs,
            )

    def _graph_paths(self, cached: CachedEmbedder) -> frozenset[str] | None:
        """The notes the graph holds: all (None), or with ``--graph-notes cached`` only
        those whose embedding the corpus cache already has (it fills slowly: MiniLM on
        this machine embeds a few notes per second)."""
        if getattr(self.args, "graph_notes", "all") != "cached":
            return None
        from make_corpus import embed_texts

        texts = embed_texts(self.vault)
        return frozenset(p for p, t in texts.items() if cached.has(t))

    def sync(self, embedder: Any) -> Any:
        """`vault-ko sync` of the World (ingest, embed, calibration when needed) with
        ``embedder``; with a graph subset, the embed step sees only those notes."""
        from pipeline.sync import calibration_needed, sync_vault

        if self.graph_paths is None:
            return sync_vault(self.settings, self.app.kodb, self.app.graph, embedder).embed
        from pipeline.calibrate import calibrate_vault
        from pipeline.embed_sync import sync_embeddings
        from pipeline.ingest import ingest_vault

        kodb = self.app.kodb
        ingest_vault(self.settings, kodb)
        view = _Subset(kodb, self.graph_paths)
        report = sync_embeddings(self.settings, view, self.app.graph, embedder)
        _, reasons = calibration_needed(self.settings, kodb, embedder)
        if reasons:
            calibrate_vault(
                kodb, self.app.graph, embedder, max_pairs=self.settings.calibration_max_pairs
            )
        return report

    # -- helpers for parts ---------------------------------------------------------------
    def questions(self, n: int, seed: int = 7) -> list[str]:
        """``n`` questions about the vault's subjects (fixed seed), a few off-topic."""
        import random

        from make_corpus import HUBS

        rng = random.Random(seed)
        titles = sorted(note.title for note in self.app.kodb.notes().values())
        forms = (
            "what do we know about {x}?",
            "why did we decide on {x}",
            "{x} incident follow-up",
            "how does {x} handle retries and timeouts?",
        )
        out: list[str] = []
        while len(out) < n:
            r = rng.random()
            if r < 0.1:
                out.append(rng.choice(("banana bread recipe", "how tall is the eiffel tower")))
            elif r < 0.3:
                out.append(rng.choice(forms).format(x=rng.choice(HUBS)))
            else:
                out.append(rng.choice(forms).format(x=rng.choice(titles)))
        return out


class _Subset:
    """The vault registry restricted to some paths (what the graph is loaded with)."""

    def __init__(self, kodb: Any, paths: frozenset[str]) -> None:
        self._kodb = kodb
        self._paths = paths

    def notes(self) -> dict[str, Any]:
        return {p: n for p, n in self._kodb.notes().items() if p in self._paths}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@contextlib.contextmanager
def world_or(world: World | None, args: argparse.Namespace, **kw: Any) -> Iterator[World]:
    """The given world, or a new one for a part run on its own."""
    if world is not None:
        yield world
        return
    with World(args, **kw) as built:
        yield built
