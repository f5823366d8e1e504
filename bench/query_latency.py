"""Warm end-to-end query latency per stage: in-process, through `vault-ko serve`, dense,
degraded (the KO-DB full-text index) and hybrid, on SQLite and PostgreSQL, side by side.

On the World (make_corpus.py's 20,000 notes and 1,000,000 imported facts by default, its own
local ArcadeDB loaded from the embedding cache): the same ``--queries`` questions are asked

* in-process with ``Pipeline.ask`` (one warm process, as `vault-ko serve` holds it): dense
  retrieval (the graph's vector search), degraded mode (``semantic=False``: the full-text
  index of the notes, as when the graph is down) and hybrid (dense + full text fused), on
  the SQLite KO-DB and on the PostgreSQL one;
* through the service: `vault-ko serve` started as a child on the vault, one ``POST /query``
  per question on a new connection (client-side time), plus the answer's own stages; once
  as users run it (KO-DB's facts in memory) and once with ``service_resident_facts = 0``
  (KO-DB read through the memo), side by side, with the service's resident memory.

Each answer's ``timings_ms`` gives the stages (embed, graph check, graph, full text, label,
KO-DB, bridge, rank): p50 / p95 of each. Also measured: the full-text index's build time
(SQLite FTS5 ``rebuild``, PostgreSQL ``REINDEX`` of the GIN index) and its size on disk.

Run: ``.venv/bin/python bench/query_latency.py [--quick]``; the last line is ``RESULT …``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from harness import (
    Report,
    Row,
    World,
    add_common_args,
    child_env,
    cli,
    log,
    p50_p95,
    pct,
    ratio,
    world_or,
)

STAGES = (
    "embed_ms",
    "graph_check_ms",
    "graph_ms",
    "fulltext_ms",
    "label_ms",
    "kodb_ms",
    "excerpts_ms",
    "bridge_ms",
    "rank_ms",
)


def stage_summary(timings: Sequence[dict[str, float]]) -> str:
    parts = []
    for stage in STAGES:
        values = [t[stage] for t in timings if stage in t]
        if values:
            name = stage.removesuffix("_ms").replace("_", " ")
            parts.append(f"{name} {pct(values, 50):.1f}/{pct(values, 95):.1f}")
    return "; ".join(parts)


def ask_all(
    app: Any, questions: Sequence[str], warm: int = 3, **options: Any
) -> list[dict[str, float]]:
    from pipeline.query import QueryOptions

    pipeline = app.pipeline()
    opts = QueryOptions.from_settings(app.settings, **options)
    for q in questions[:warm]:  # warm up this mode's caches
        pipeline.ask(q, opts)
    out = []
    for q in questions:
        answer = pipeline.ask(q, opts)
        if options.get("semantic", True) and answer.mode != "semantic":
            raise SystemExit(f"expected a semantic answer, got {answer.mode}: {q!r}")
        out.append(dict(answer.timings_ms))
    return out


def totals(timings: Sequence[dict[str, float]]) -> list[float]:
    return [t["total_ms"] for t in timings]


#: Questions no vault here knows about: their answers are no_match and read no subject,
#: so their latency is the service's floor on this machine (HTTP, embedding, scan, label).
OFF_TOPIC = tuple(
    f"{dish} recipe with {extra}"
    for dish in ("banana bread", "sourdough starter", "lemon tart", "pumpkin soup", "paella")
    for extra in ("walnuts", "extra butter", "saffron", "cinnamon")
)


def _rss_mb(pid: int) -> float:
    """A process's resident memory (Linux /proc), MB; 0 when unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def service_queries(
    w: World,
    questions: Sequence[str],
    floor_questions: Sequence[str] = (),
    *,
    resident: bool = True,
) -> dict[str, Any]:
    """`vault-ko serve` on the World's vault: client-side ms and the service's own timings
    of each question, then of those ``floor_questions`` it answered no_match; how long the
    note vectors and (``resident``) KO-DB's facts took to be in memory after the first
    question, and the service's resident memory at the end."""
    extra = {} if resident else {"VAULT_KO_SERVICE_RESIDENT_FACTS": "0"}
    proc = subprocess.Popen(
        [cli(), "--vault", str(w.vault), "serve", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=child_env(**extra),
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        line = proc.stdout.readline() if ready else ""
        if not line:
            raise SystemExit("the service did not start")
        host, port = json.loads(line)["url"].removeprefix("http://").rsplit(":", 1)

        def post(q: str, *, loading: bool = False) -> tuple[float, dict]:
            """One question; outside the load every answer must be semantic."""
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            conn.request(
                "POST", "/query", json.dumps({"question": q}), {"Content-Type": "application/json"}
            )
            response = conn.getresponse()
            data = json.loads(response.read())
            conn.close()
            ms = (time.perf_counter() - t0) * 1e3
            if response.status == 200 and loading:
                during_load.append((ms, data.get("mode") or ""))
            elif response.status != 200 or data.get("mode") != "semantic":
                raise SystemExit(f"service: {response.status} {str(data)[:300]}")
            return ms, data

        def health() -> dict[str, Any]:
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            conn.request("GET", "/healthz")
            data = json.loads(conn.getresponse().read())
            conn.close()
            return data  # type: ignore[no-any-return]

        # Questions asked while the vectors and facts load: answered by the graph's index and
        # KO-DB, as users' are after a start; their time and mode are reported, not required.
        during_load: list[tuple[float, str]] = []
        start = time.monotonic()
        post(questions[0], loading=True)  # loads the model, starts the reads of vectors, facts
        ready_at: dict[str, float] = {}
        deadline = start + 900
        while time.monotonic() < deadline:
            h = health()
            for key in ("warm_vectors", "warm_facts"):
                if h.get(key) and key not in ready_at:
                    ready_at[key] = time.monotonic() - start
            if "warm_vectors" in ready_at and ("warm_facts" in ready_at or not resident):
                break
            time.sleep(0.5)
            post(questions[0], loading=True)  # a read that found KO-DB changed starts again
        h = health()
        log(
            f"service: {h.get('warm_vectors')} note vectors, {h.get('warm_facts')} facts in "
            f"memory ({ready_at})"
        )
        for q in questions[:3]:  # warm up
            post(q)
        client: list[float] = []
        inside: list[dict] = []
        for q in questions:
            ms, data = post(q)
            client.append(ms)
            inside.append(data["timings_ms"])
        floor_client: list[float] = []
        floor_inside: list[dict] = []
        for q in floor_questions:
            ms, data = post(q)
            if data["relevance"]["label"] == "no_match":
                floor_client.append(ms)
                floor_inside.append(data["timings_ms"])
        return {
            "client": client,
            "inside": inside,
            "floor": floor_client,
            "floor_inside": floor_inside,
            "vectors_s": ready_at.get("warm_vectors", float("nan")),
            "facts_s": ready_at.get("warm_facts", float("nan")),
            "facts": int(h.get("warm_facts") or 0),
            "rss_mb": _rss_mb(proc.pid),
            "during_load": during_load,
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def _answer_stages(timings: Sequence[dict[str, float]]) -> list[float]:
    """Per answer, the stages after the search: KO-DB, bridge, rank (ms)."""
    return [sum(t.get(s, 0.0) for s in ("kodb_ms", "bridge_ms", "rank_ms")) for t in timings]


def fulltext_index(db: Any) -> tuple[float, int]:
    """(seconds to rebuild the notes' full-text index, its size in bytes) — bench-side SQL,
    read-only apart from the rebuild, which leaves the index as it was."""
    from pipeline.kodb.schema import NOTE_TSV

    with db._tx(write=True) as conn:
        t0 = time.perf_counter()
        if db.dialect == "sqlite":
            conn.exec_driver_sql("INSERT INTO note_texts_fts(note_texts_fts) VALUES('rebuild')")
            seconds = time.perf_counter() - t0
            size = conn.exec_driver_sql(
                "SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'note_texts_fts%'"
            ).scalar()
        else:
            conn.exec_driver_sql("REINDEX INDEX ix_note_texts_tsv")
            seconds = time.perf_counter() - t0
            size = conn.exec_driver_sql(
                f"SELECT pg_relation_size('ix_note_texts_tsv') + "
                f"(SELECT COALESCE(SUM(pg_column_size({NOTE_TSV})), 0) FROM note_texts)"
            ).scalar()
    return seconds, int(size or 0)


def run(report: Report, args: argparse.Namespace, world: World | None = None) -> None:
    with world_or(world, args) as w:
        questions = w.questions(w.size["queries"])
        notes = f"{w.size['notes']:,} notes, {w.graph_notes:,} in the graph"
        facts = f"{w.app.kodb.count_facts():,} facts"
        warm = 1 if args.quick else 3
        dense = ask_all(w.app, questions, warm, retrieval="dense")
        dense_total = totals(dense)
        report.add(
            Row(
                f"warm query, in-process, dense, SQLite ({notes}, {facts}): total p50 / p95",
                p50_p95(dense_total),
                "stages p50/p95 ms: " + stage_summary(dense),
            ),
            dense_sqlite_p50_ms=pct(dense_total, 50),
            dense_sqlite_p95_ms=pct(dense_total, 95),
            **{
                f"dense_{s.removesuffix('_ms')}_p50_ms": pct([t[s] for t in dense if s in t], 50)
                for s in STAGES
                if any(s in t for t in dense)
            },
        )
        memo = service_queries(w, questions, resident=False)
        served = service_queries(w, questions, OFF_TOPIC)
        client, inside = served["client"], served["inside"]
        floor, floor_inside = served["floor"], served["floor_inside"]
        # The service answers in the default retrieval: compared with the same in-process.
        default = w.app.settings.query_retrieval
        own = dense if default == "dense" else ask_all(w.app, questions, warm, retrieval=default)
        own_total = totals(own)
        report.add(
            Row(
                "warm query through `vault-ko serve` (POST /query, client side), "
                f"{default} (the default), SQLite: p50 / p95",
                p50_p95(client),
                f"in-process {p50_p95(own_total)}; inside the service "
                f"{p50_p95(totals(inside))}: " + stage_summary(inside),
                f"{ratio(pct(client, 50), pct(own_total, 50)):.2f}× in-process (p50)",
                "p50 < 25 ms" if pct(client, 50) < 25 else "p50 ≥ 25 ms",
            ),
            service_p50_ms=pct(client, 50),
            service_p95_ms=pct(client, 95),
            service_inside_p50_ms=pct(totals(inside), 50),
        )
        after, before = _answer_stages(inside), _answer_stages(memo["inside"])
        report.add(
            Row(
                f"  the same service with KO-DB's {served['facts']:,} facts in memory: KO-DB + "
                "bridge + rank per answer p50 / p95; client p50; read in; service RSS",
                f"{p50_p95(after)}; client {pct(client, 50):.2f} ms; "
                f"{served['facts_s']:.1f} s; {served['rss_mb']:.0f} MB",
                f"without the copy (service_resident_facts = 0, KO-DB read through the memo): "
                f"{p50_p95(before)}; client {pct(memo['client'], 50):.2f} ms; "
                f"{memo['rss_mb']:.0f} MB",
                f"{ratio(pct(before, 50), pct(after, 50)):.1f}× faster stages, "
                f"{ratio(pct(memo['client'], 50), pct(client, 50)):.2f}× the answer (p50)",
            ),
            resident_stages_p50_ms=pct(after, 50),
            memo_stages_p50_ms=pct(before, 50),
            memo_service_p50_ms=pct(memo["client"], 50),
            resident_read_s=served["facts_s"],
            service_rss_mb=served["rss_mb"],
            memo_service_rss_mb=memo["rss_mb"],
        )
        loading = served["during_load"]
        if loading:
            load_ms = [ms for ms, _ in loading]
            semantic = sum(mode == "semantic" for _, mode in loading)
            report.add(
                Row(
                    f"  questions asked while the service read its vectors and facts "
                    f"({len(loading)}, the graph's index answering): client p50 / p95; "
                    "answered semantic",
                    f"{p50_p95(load_ms)}; {semantic} of {len(loading)} semantic",
                    f"vectors in memory after {served['vectors_s']:.1f} s",
                    f"{ratio(pct(load_ms, 50), pct(client, 50)):.1f}× a warm answer (p50)",
                    "all semantic" if semantic == len(loading) else "some fell back",
                ),
                loading_p50_ms=pct(load_ms, 50),
                loading_semantic=semantic,
                loading_questions=len(loading),
                vectors_read_s=served["vectors_s"],
            )
        if floor:
            report.add(
                Row(
                    f"the service's floor: {len(floor)} off-topic questions answered no_match "
                    "(HTTP, embedding, scan, the default retrieval's full-text search, label; "
                    "no subject read): p50 / p95",
                    p50_p95(floor),
                    f"inside the service {p50_p95(totals(floor_inside))}: "
                    + stage_summary(floor_inside),
                    f"{ratio(pct(floor, 50), pct(client, 50)):.2f}× a question's answer (p50)",
                ),
                service_floor_p50_ms=pct(floor, 50),
                service_floor_inside_p50_ms=pct(totals(floor_inside), 50),
            )

        apps = [("sqlite", "SQLite", w.app)]
        if w.pg_app is not None:
            apps.append(("pg", "PostgreSQL", w.pg_app))
        for key, label, app in apps:
            base = dense if key == "sqlite" else ask_all(app, questions, warm, retrieval="dense")
            base_total = totals(base)
            if key != "sqlite":
                report.add(
                    Row(
                        f"warm query, in-process, dense, {label}: total p50 / p95",
                        p50_p95(base_total),
                        "stages p50/p95 ms: " + stage_summary(base),
                    ),
                    **{f"dense_{key}_p50_ms": pct(base_total, 50)},
                )
            for mode, opts in (
                ("fallback", {"semantic": False}),
                ("hybrid", {"retrieval": "hybrid"}),
            ):
                got = ask_all(app, questions, warm, **opts)
                total = totals(got)
                what = (
                    "degraded mode (full-text index)"
                    if mode == "fallback"
                    else "hybrid (dense + full text)"
                )
                check = ""
                if mode == "fallback" and key == "sqlite":
                    check = "p50 < 50 ms" if pct(total, 50) < 50 else "p50 ≥ 50 ms"
                report.add(
                    Row(
                        f"same questions, {what}, {label}: total p50 / p95",
                        p50_p95(total),
                        f"dense {p50_p95(base_total)}; stages: " + stage_summary(got),
                        f"{ratio(pct(total, 50), pct(base_total, 50)):.2f}× dense (p50)",
                        check,
                    ),
                    **{
                        f"{mode}_{key}_p50_ms": pct(total, 50),
                        f"{mode}_{key}_p95_ms": pct(total, 95),
                    },
                )
            seconds, size = fulltext_index(app.kodb)
            n = app.kodb.note_text_count()
            report.add(
                Row(
                    f"notes' full-text index, {label}: build (rebuild of {n:,} notes), size",
                    f"{seconds:.2f} s, {size / 2**20:.1f} MiB",
                    f"ingest of the same notes {w.measures.get(f'ingest_{key}_s', 0):.1f} s",
                    f"{size / max(n, 1) / 1024:.1f} KiB/note",
                ),
                **{f"fts_{key}_build_s": seconds, f"fts_{key}_mib": size / 2**20},
            )
        log("query latency: done")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--queries", type=int)
    args = parser.parse_args()
    report = Report()
    run(report, args)
    report.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
